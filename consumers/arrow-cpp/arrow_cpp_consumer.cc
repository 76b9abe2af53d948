// arrowcert consumer plugin around Arrow C++ (the pyarrow wheel's libarrow).
//
// Every entry point imports what it is given with Arrow C++'s own bridge
// functions (arrow/c/bridge.h), which move the base structures (or release
// them on failure), validates every value (RecordBatch::ValidateFull), writes
// what it read as one Arrow IPC stream (arrow::ipc::MakeStreamWriter) into
// malloc'd memory (freed by arrowcert_free), and drops every C++ object that
// holds imported data before returning, so everything imported is released
// by then.
//
// Device support: host memory only (ARROW_DEVICE_CPU), through Arrow C++'s
// DefaultDeviceMemoryMapper.

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <unordered_map>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <arrow/buffer.h>
#include <arrow/c/bridge.h>
#include <arrow/c/helpers.h>
#include <arrow/device.h>
#include <arrow/io/memory.h>
#include <arrow/ipc/writer.h>
#include <arrow/record_batch.h>
#include <arrow/result.h>
#include <arrow/util/future.h>
#include <arrow/util/thread_pool.h>

// arrowcert_arrow_cpp_common.h lives with the producer plugin (shared file).
#include "arrowcert_arrow_cpp_common.h"

namespace {

// Arrow C++'s record batch import (ImportRecordBatch, ImportDeviceRecordBatch,
// and the stream/async importers built on them) refuses a struct array with a
// non-zero top-level offset with Status::Invalid("ArrowArray struct has
// non-zero offset, cannot be imported as RecordBatch"). The spec allows that
// ("Consumers MAY decide not to support non-0-offset arrays, but they should
// document this limitation", CDataInterface.rst), so it is reported to the
// harness as a declared limitation (ENOSYS), not as invalid input. Every
// other failure keeps Arrow C++'s own status.
arrow::Status DeclareLimitations(arrow::Status st) {
  if (st.IsInvalid() &&
      st.message().rfind("ArrowArray struct has non-zero offset", 0) == 0) {
    return arrow::Status::NotImplemented(
        st.message(), " (limitation of Arrow C++'s record batch import: a record batch "
        "exported as a struct array with a non-zero offset is not supported)");
  }
  return st;
}

template <typename F>
int Guard(F&& body) noexcept {
  return arrowcert_cpp::Guard([&]() -> arrow::Status { return DeclareLimitations(body()); });
}

arrow::Status CheckOut(uint8_t** out_ipc, int64_t* out_len) {
  if (out_ipc == nullptr || out_len == nullptr) {
    return arrow::Status::Invalid("out_ipc or out_len is NULL");
  }
  return arrow::Status::OK();
}

// Only host memory is read here; anything else is refused before a byte of
// it is touched.
arrow::Status RequireCpuBatch(const arrow::RecordBatch& batch) {
  if (batch.device_type() != arrow::DeviceAllocationType::kCPU) {
    return arrow::Status::NotImplemented(
        "record batch on device type ", static_cast<int>(batch.device_type()),
        ": this consumer reads host memory (ARROW_DEVICE_CPU) only");
  }
  return arrow::Status::OK();
}

// Reads every value (full validation walks every offset, index and view;
// the IPC writer copies every buffer) and hands the IPC stream bytes back.
arrow::Status Emit(const std::shared_ptr<arrow::Schema>& schema,
                   const std::vector<std::shared_ptr<arrow::RecordBatch>>& batches,
                   uint8_t** out_ipc, int64_t* out_len) {
  for (const auto& batch : batches) {
    ARROW_RETURN_NOT_OK(RequireCpuBatch(*batch));
    ARROW_RETURN_NOT_OK(batch->ValidateFull());
  }
  ARROW_ASSIGN_OR_RAISE(auto sink, arrow::io::BufferOutputStream::Create());
  ARROW_ASSIGN_OR_RAISE(auto writer, arrow::ipc::MakeStreamWriter(sink, schema));
  for (const auto& batch : batches) {
    ARROW_RETURN_NOT_OK(writer->WriteRecordBatch(*batch));
  }
  ARROW_RETURN_NOT_OK(writer->Close());
  ARROW_ASSIGN_OR_RAISE(auto buf, sink->Finish());
  const int64_t n = buf->size();
  auto* mem = static_cast<uint8_t*>(std::malloc(n > 0 ? static_cast<size_t>(n) : 1));
  if (mem == nullptr) return arrow::Status::OutOfMemory("malloc of ", n, " bytes failed");
  if (n > 0) std::memcpy(mem, buf->data(), static_cast<size_t>(n));
  *out_ipc = mem;
  *out_len = n;
  return arrow::Status::OK();
}

void ReleaseIfLive(struct ArrowSchema* s) {
  if (s != nullptr && !ArrowSchemaIsReleased(s)) ArrowSchemaRelease(s);
}
void ReleaseIfLive(struct ArrowArray* a) {
  if (a != nullptr && !ArrowArrayIsReleased(a)) ArrowArrayRelease(a);
}

// ---- async consumer -----------------------------------------------------------

// "finish() waits (at most timeout_ms) until the handler's release was
// called" (PLUGIN_ABI.md). Arrow C++ owns the handler's callbacks and
// private_data, so the only way to observe its release is to interpose on
// the release pointer after CreateAsyncDeviceStreamHandler filled it in: the
// interposed release calls Arrow C++'s own release first, unchanged, then
// signals the token. Handlers are found by address in a registry.
struct ReleaseSignal {
  std::mutex mutex;
  std::condition_variable cv;
  bool released = false;
  void (*arrow_release)(struct ArrowAsyncDeviceStreamHandler*) = nullptr;
};

std::mutex g_handlers_mutex;
std::unordered_map<struct ArrowAsyncDeviceStreamHandler*, std::shared_ptr<ReleaseSignal>>
    g_handlers;

void InterposedRelease(struct ArrowAsyncDeviceStreamHandler* handler) {
  std::shared_ptr<ReleaseSignal> signal;
  {
    std::lock_guard<std::mutex> lock(g_handlers_mutex);
    auto it = g_handlers.find(handler);
    if (it != g_handlers.end()) {
      signal = it->second;
      g_handlers.erase(it);
    }
  }
  if (!signal) return;  // not ours (cannot happen), or released twice
  signal->arrow_release(handler);
  std::lock_guard<std::mutex> lock(signal->mutex);
  signal->released = true;
  signal->cv.notify_all();
}

struct AsyncToken {
  arrow::Future<arrow::AsyncRecordBatchGenerator> generator;
  std::shared_ptr<ReleaseSignal> release;
};

constexpr uint64_t kAsyncQueueSize = 5;

}  // namespace

ARROWCERT_ARROW_CPP_IDENTITY()

extern "C" {

ARROWCERT_EXPORT int arrowcert_consume_array(struct ArrowSchema* schema,
                                             struct ArrowArray* array, uint8_t** out_ipc,
                                             int64_t* out_len) {
  return Guard([&]() -> arrow::Status {
    if (schema == nullptr || array == nullptr) {
      ReleaseIfLive(schema);
      ReleaseIfLive(array);
      return arrow::Status::Invalid("schema or array is NULL");
    }
    // Imports (moves) both, or releases them on failure.
    auto imported = arrow::ImportRecordBatch(array, schema);
    ARROW_RETURN_NOT_OK(CheckOut(out_ipc, out_len));
    ARROW_ASSIGN_OR_RAISE(auto batch, std::move(imported));
    return Emit(batch->schema(), {batch}, out_ipc, out_len);
  });
}

ARROWCERT_EXPORT int arrowcert_consume_device_array(struct ArrowSchema* schema,
                                                    struct ArrowDeviceArray* array,
                                                    uint8_t** out_ipc, int64_t* out_len) {
  return Guard([&]() -> arrow::Status {
    if (schema == nullptr || array == nullptr) {
      ReleaseIfLive(schema);
      if (array != nullptr) ReleaseIfLive(&array->array);
      return arrow::Status::Invalid("schema or array is NULL");
    }
    auto imported =
        arrow::ImportDeviceRecordBatch(array, schema, arrow::DefaultDeviceMemoryMapper);
    ARROW_RETURN_NOT_OK(CheckOut(out_ipc, out_len));
    ARROW_ASSIGN_OR_RAISE(auto batch, std::move(imported));
    // Host memory carries no sync event (ARROW_DEVICE_CPU has none), so there
    // is nothing to wait on before reading.
    return Emit(batch->schema(), {batch}, out_ipc, out_len);
  });
}

ARROWCERT_EXPORT int arrowcert_consume_stream(struct ArrowArrayStream* stream,
                                              uint8_t** out_ipc, int64_t* out_len) {
  return Guard([&]() -> arrow::Status {
    if (stream == nullptr) return arrow::Status::Invalid("stream is NULL");
    ARROW_ASSIGN_OR_RAISE(auto reader, arrow::ImportRecordBatchReader(stream));
    std::vector<std::shared_ptr<arrow::RecordBatch>> batches;
    std::shared_ptr<arrow::Schema> schema = reader->schema();
    arrow::Status st = [&]() -> arrow::Status {
      ARROW_RETURN_NOT_OK(CheckOut(out_ipc, out_len));
      while (true) {
        std::shared_ptr<arrow::RecordBatch> batch;
        ARROW_RETURN_NOT_OK(reader->ReadNext(&batch));
        if (batch == nullptr) break;
        batches.push_back(std::move(batch));
      }
      return arrow::Status::OK();
    }();
    // Releases the stream (the batches already read keep their own data).
    ARROW_RETURN_NOT_OK(reader->Close());
    reader.reset();
    ARROW_RETURN_NOT_OK(st);
    return Emit(schema, batches, out_ipc, out_len);
  });
}

ARROWCERT_EXPORT int arrowcert_consume_device_stream(struct ArrowDeviceArrayStream* stream,
                                                     uint8_t** out_ipc, int64_t* out_len) {
  return Guard([&]() -> arrow::Status {
    if (stream == nullptr) return arrow::Status::Invalid("stream is NULL");
    ARROW_ASSIGN_OR_RAISE(auto reader, arrow::ImportDeviceRecordBatchReader(
                                           stream, arrow::DefaultDeviceMemoryMapper));
    std::vector<std::shared_ptr<arrow::RecordBatch>> batches;
    std::shared_ptr<arrow::Schema> schema = reader->schema();
    arrow::Status st = [&]() -> arrow::Status {
      ARROW_RETURN_NOT_OK(CheckOut(out_ipc, out_len));
      if (reader->device_type() != arrow::DeviceAllocationType::kCPU) {
        return arrow::Status::NotImplemented(
            "device stream on device type ", static_cast<int>(reader->device_type()),
            ": this consumer reads host memory (ARROW_DEVICE_CPU) only");
      }
      while (true) {
        std::shared_ptr<arrow::RecordBatch> batch;
        ARROW_RETURN_NOT_OK(reader->ReadNext(&batch));
        if (batch == nullptr) break;
        batches.push_back(std::move(batch));
      }
      return arrow::Status::OK();
    }();
    ARROW_RETURN_NOT_OK(reader->Close());
    reader.reset();
    ARROW_RETURN_NOT_OK(st);
    return Emit(schema, batches, out_ipc, out_len);
  });
}

ARROWCERT_EXPORT int arrowcert_consume_async_start(
    struct ArrowAsyncDeviceStreamHandler* handler, void** token) {
  return Guard([&]() -> arrow::Status {
    if (handler == nullptr || token == nullptr) {
      return arrow::Status::Invalid("handler or token is NULL");
    }
    auto t = std::make_unique<AsyncToken>();
    // Populates every member of the handler; the future resolves once
    // on_schema (or on_error) came.
    t->generator = arrow::CreateAsyncDeviceStreamHandler(
        handler, arrow::internal::GetCpuThreadPool(), kAsyncQueueSize,
        arrow::DefaultDeviceMemoryMapper);
    t->release = std::make_shared<ReleaseSignal>();
    t->release->arrow_release = handler->release;
    {
      std::lock_guard<std::mutex> lock(g_handlers_mutex);
      g_handlers[handler] = t->release;
    }
    handler->release = InterposedRelease;
    *token = t.release();
    return arrow::Status::OK();
  });
}

ARROWCERT_EXPORT int arrowcert_consume_async_finish(void* token, int64_t timeout_ms,
                                                    uint8_t** out_ipc, int64_t* out_len) {
  return Guard([&]() -> arrow::Status {
    if (token == nullptr) return arrow::Status::Invalid("token is NULL");
    std::unique_ptr<AsyncToken> t(static_cast<AsyncToken*>(token));
    ARROW_RETURN_NOT_OK(CheckOut(out_ipc, out_len));
    if (timeout_ms < 0) return arrow::Status::Invalid("negative timeout_ms ", timeout_ms);
    using Clock = std::chrono::steady_clock;
    const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
    auto remaining = [&]() -> double {
      auto left = std::chrono::duration<double>(deadline - Clock::now()).count();
      return left > 0 ? left : 0.0;
    };
    auto timed_out = [&](const char* what) {
      return arrow::internal::IOErrorFromErrno(ETIMEDOUT, "timed out after ", timeout_ms,
                                               " ms waiting for ", what);
    };
    std::shared_ptr<ReleaseSignal> release = t->release;
    std::shared_ptr<arrow::Schema> schema;
    std::vector<std::shared_ptr<arrow::RecordBatch>> batches;
    // Phase 1: everything the handler received, through Arrow C++'s generator.
    arrow::Status read = [&]() -> arrow::Status {
      if (!t->generator.Wait(remaining())) return timed_out("the schema");
      ARROW_ASSIGN_OR_RAISE(arrow::AsyncRecordBatchGenerator gen, t->generator.result());
      schema = gen.schema;
      while (true) {
        auto next = gen.generator();
        if (!next.Wait(remaining())) return timed_out("the next record batch");
        ARROW_ASSIGN_OR_RAISE(arrow::RecordBatchWithMetadata item, next.result());
        if (arrow::IsIterationEnd(item)) break;
        batches.push_back(std::move(item.batch));
      }
      return arrow::Status::OK();
    }();
    t.reset();
    // Phase 2: the handler's release (the end of the exchange).
    bool released;
    {
      std::unique_lock<std::mutex> lock(release->mutex);
      released = release->cv.wait_for(
          lock, std::chrono::duration<double>(remaining()), [&] { return release->released; });
    }
    ARROW_RETURN_NOT_OK(read);
    if (!released) return timed_out("the handler's release");
    return Emit(schema, batches, out_ipc, out_len);
  });
}

}  // extern "C"
