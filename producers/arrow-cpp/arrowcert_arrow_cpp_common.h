// Shared by the Arrow C++ adapter plugins (producers/arrow-cpp and
// consumers/arrow-cpp): identity, thread-local last error, errno mapping of
// arrow::Status, and the exception barrier every entry point goes through.
//
// Header-only on purpose: each plugin is its own shared library and includes
// this once.
#ifndef ARROWCERT_ARROW_CPP_COMMON_H
#define ARROWCERT_ARROW_CPP_COMMON_H

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <new>
#include <string>
#include <utility>

#include <arrow/c/bridge.h>
#include <arrow/config.h>
#include <arrow/status.h>
#include <arrow/util/io_util.h>

#include "arrowcert_plugin.h"

namespace arrowcert_cpp {

// "Message for the last failing call on this thread; valid until the next
// call into the plugin on this thread. NULL if none." (PLUGIN_ABI.md)
inline thread_local std::string g_last_error;
inline thread_local bool g_has_error = false;

inline void ClearError() {
  g_has_error = false;
  g_last_error.clear();
}

inline int SetError(int code, std::string message) {
  g_last_error = std::move(message);
  g_has_error = true;
  return code;
}

// The errno value an arrow::Status stands for. The C interfaces carry errno
// values; Arrow C++ turns them into Status codes (and, for the async
// interface, keeps the original code in an AsyncErrorDetail), so prefer the
// detail when there is one.
inline int ErrnoOf(const arrow::Status& st) {
  if (st.ok()) return 0;
  if (auto detail = st.detail()) {
    if (auto async = dynamic_cast<const arrow::AsyncErrorDetail*>(detail.get())) {
      if (async->code() != 0) return async->code();
    }
    if (auto e = arrow::internal::ErrnoFromStatusDetail(*detail)) {
      if (*e != 0) return *e;
    }
  }
  switch (st.code()) {
    case arrow::StatusCode::OutOfMemory:
      return ENOMEM;
    case arrow::StatusCode::Invalid:
    case arrow::StatusCode::TypeError:
    case arrow::StatusCode::KeyError:
    case arrow::StatusCode::IndexError:
    case arrow::StatusCode::CapacityError:
    case arrow::StatusCode::SerializationError:
      return EINVAL;
    case arrow::StatusCode::NotImplemented:
      return ENOSYS;
    case arrow::StatusCode::Cancelled:
      return ECANCELED;
    case arrow::StatusCode::AlreadyExists:
      return EEXIST;
    default:
      return EIO;
  }
}

inline int SetError(const arrow::Status& st) {
  std::string msg = st.message();
  if (msg.empty()) msg = st.ToString();
  return SetError(ErrnoOf(st), std::move(msg));
}

// Runs an entry point body (returning arrow::Status), clearing the last error
// first and turning failures and C++ exceptions into errno values.
template <typename F>
int Guard(F&& body) noexcept {
  try {
    ClearError();
    arrow::Status st = body();
    if (st.ok()) return 0;
    return SetError(st);
  } catch (const std::bad_alloc& e) {
    return SetError(ENOMEM, std::string("out of memory: ") + e.what());
  } catch (const std::exception& e) {
    return SetError(EIO, std::string("C++ exception: ") + e.what());
  } catch (...) {
    return SetError(EIO, "unknown C++ exception");
  }
}

inline const char* PluginName() {
  static const std::string name = [] {
    try {
      return "Arrow C++ " + arrow::GetBuildInfo().version_string;
    } catch (...) {
      return std::string("Arrow C++");
    }
  }();
  return name.c_str();
}

}  // namespace arrowcert_cpp

// ---- identity symbols common to both plugins ------------------------------

#define ARROWCERT_ARROW_CPP_IDENTITY()                                          \
  extern "C" {                                                                \
  ARROWCERT_EXPORT int32_t arrowcert_plugin_abi_version(void) {               \
    return ARROWCERT_PLUGIN_ABI_VERSION;                                      \
  }                                                                           \
  ARROWCERT_EXPORT const char* arrowcert_plugin_name(void) {                  \
    return arrowcert_cpp::PluginName();                                       \
  }                                                                           \
  /* Host memory only: the pyarrow wheel carries no CUDA module. */           \
  ARROWCERT_EXPORT int32_t arrowcert_plugin_supports_device(int32_t t) {      \
    return t == ARROW_DEVICE_CPU ? 1 : 0;                                     \
  }                                                                           \
  ARROWCERT_EXPORT const char* arrowcert_last_error(void) {                   \
    return arrowcert_cpp::g_has_error ? arrowcert_cpp::g_last_error.c_str()   \
                                      : nullptr;                              \
  }                                                                           \
  ARROWCERT_EXPORT void arrowcert_free(void* ptr) { std::free(ptr); }         \
  }

#endif  // ARROWCERT_ARROW_CPP_COMMON_H
