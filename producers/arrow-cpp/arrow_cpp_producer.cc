// arrowcert producer plugin around Arrow C++ (the pyarrow wheel's libarrow).
//
// Every entry point decodes the harness's IPC stream bytes with
// arrow::ipc::RecordBatchStreamReader and exports with Arrow C++'s own bridge
// functions (arrow/c/bridge.h), straight into the harness's `out` structure:
// nothing here initialises, repairs or re-wraps what Arrow C++ writes.
//
// Device support: host memory only (ARROW_DEVICE_CPU, device_id -1); other
// device types are refused with ENOSYS before anything is written.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <arrow/buffer.h>
#include <arrow/c/bridge.h>
#include <arrow/device.h>
#include <arrow/io/memory.h>
#include <arrow/ipc/reader.h>
#include <arrow/record_batch.h>
#include <arrow/result.h>
#include <arrow/util/async_generator.h>
#include <arrow/util/future.h>

#include "arrowcert_arrow_cpp_common.h"

namespace {

using arrowcert_cpp::Guard;

struct Decoded {
  std::shared_ptr<arrow::Schema> schema;
  std::vector<std::shared_ptr<arrow::RecordBatch>> batches;
};

// The input is only valid during the call: copy it into an Arrow buffer the
// decoded (zero-copy) batches keep alive.
arrow::Result<Decoded> Decode(const uint8_t* ipc, int64_t ipc_len) {
  if (ipc == nullptr && ipc_len != 0) return arrow::Status::Invalid("ipc is NULL");
  if (ipc_len < 0) return arrow::Status::Invalid("negative ipc_len ", ipc_len);
  ARROW_ASSIGN_OR_RAISE(std::shared_ptr<arrow::Buffer> copy,
                        arrow::AllocateBuffer(ipc_len));
  if (ipc_len > 0) std::memcpy(copy->mutable_data(), ipc, static_cast<size_t>(ipc_len));
  auto input = std::make_shared<arrow::io::BufferReader>(copy);
  ARROW_ASSIGN_OR_RAISE(auto reader, arrow::ipc::RecordBatchStreamReader::Open(input));
  Decoded out;
  out.schema = reader->schema();
  ARROW_ASSIGN_OR_RAISE(out.batches, reader->ToRecordBatches());
  ARROW_RETURN_NOT_OK(reader->Close());
  return out;
}

arrow::Result<std::shared_ptr<arrow::RecordBatch>> PickBatch(const Decoded& d,
                                                             int64_t batch_index,
                                                             int64_t slice_offset,
                                                             int64_t slice_length) {
  if (batch_index < 0 || batch_index >= static_cast<int64_t>(d.batches.size())) {
    return arrow::Status::Invalid("batch_index ", batch_index, " out of range: the stream has ",
                                  d.batches.size(), " batches");
  }
  std::shared_ptr<arrow::RecordBatch> batch = d.batches[static_cast<size_t>(batch_index)];
  if (slice_offset == 0 && slice_length == -1) return batch;
  if (slice_offset < 0 || slice_offset > batch->num_rows()) {
    return arrow::Status::Invalid("slice_offset ", slice_offset, " out of range for ",
                                  batch->num_rows(), " rows");
  }
  if (slice_length == -1) return batch->Slice(slice_offset);
  if (slice_length < 0 || slice_offset + slice_length > batch->num_rows()) {
    return arrow::Status::Invalid("slice [", slice_offset, ", +", slice_length,
                                  ") out of range for ", batch->num_rows(), " rows");
  }
  return batch->Slice(slice_offset, slice_length);
}

arrow::Status RequireCpu(int32_t device_type, int64_t device_id) {
  if (device_type != ARROW_DEVICE_CPU) {
    return arrow::Status::NotImplemented(
        "device_type ", device_type,
        " is not supported: this Arrow C++ build (pyarrow wheel) exports host memory "
        "only (ARROW_DEVICE_CPU = 1)");
  }
  if (device_id != -1) {
    return arrow::Status::NotImplemented(
        "device_id ", device_id,
        " is not supported for ARROW_DEVICE_CPU: Arrow C++'s CPU device has id -1");
  }
  return arrow::Status::OK();
}

// ---- async producer bookkeeping ---------------------------------------------
//
// ExportAsyncRecordBatchReader drives the handler from the thread that calls
// it until the returned future is finished (it waits for request() on a
// condition variable), so each async export runs on a thread of its own that
// keeps the generator and batches alive until the stream has ended. The
// library destructor waits (bounded) for those threads so no code of this
// library runs after dlclose.

std::mutex g_jobs_mutex;
std::condition_variable g_jobs_cv;
int g_jobs_running = 0;

struct JobsDrain {
  ~JobsDrain() {
    std::unique_lock<std::mutex> lock(g_jobs_mutex);
    g_jobs_cv.wait_for(lock, std::chrono::seconds(5), [] { return g_jobs_running == 0; });
  }
};
JobsDrain g_jobs_drain;

}  // namespace

ARROWCERT_ARROW_CPP_IDENTITY()

extern "C" {

ARROWCERT_EXPORT int arrowcert_produce_schema(const uint8_t* ipc, int64_t ipc_len,
                                              struct ArrowSchema* out) {
  return Guard([&]() -> arrow::Status {
    if (out == nullptr) return arrow::Status::Invalid("out is NULL");
    ARROW_ASSIGN_OR_RAISE(auto d, Decode(ipc, ipc_len));
    return arrow::ExportSchema(*d.schema, out);
  });
}

ARROWCERT_EXPORT int arrowcert_produce_array(const uint8_t* ipc, int64_t ipc_len,
                                             int64_t batch_index, int64_t slice_offset,
                                             int64_t slice_length, struct ArrowArray* out) {
  return Guard([&]() -> arrow::Status {
    if (out == nullptr) return arrow::Status::Invalid("out is NULL");
    ARROW_ASSIGN_OR_RAISE(auto d, Decode(ipc, ipc_len));
    ARROW_ASSIGN_OR_RAISE(auto batch, PickBatch(d, batch_index, slice_offset, slice_length));
    return arrow::ExportRecordBatch(*batch, out);
  });
}

ARROWCERT_EXPORT int arrowcert_produce_stream(const uint8_t* ipc, int64_t ipc_len,
                                              struct ArrowArrayStream* out) {
  return Guard([&]() -> arrow::Status {
    if (out == nullptr) return arrow::Status::Invalid("out is NULL");
    ARROW_ASSIGN_OR_RAISE(auto d, Decode(ipc, ipc_len));
    ARROW_ASSIGN_OR_RAISE(auto reader,
                          arrow::RecordBatchReader::Make(std::move(d.batches), d.schema));
    return arrow::ExportRecordBatchReader(std::move(reader), out);
  });
}

ARROWCERT_EXPORT int arrowcert_produce_device_array(const uint8_t* ipc, int64_t ipc_len,
                                                    int64_t batch_index,
                                                    int64_t slice_offset,
                                                    int64_t slice_length,
                                                    int32_t device_type, int64_t device_id,
                                                    struct ArrowDeviceArray* out) {
  return Guard([&]() -> arrow::Status {
    if (out == nullptr) return arrow::Status::Invalid("out is NULL");
    ARROW_RETURN_NOT_OK(RequireCpu(device_type, device_id));
    ARROW_ASSIGN_OR_RAISE(auto d, Decode(ipc, ipc_len));
    ARROW_ASSIGN_OR_RAISE(auto batch, PickBatch(d, batch_index, slice_offset, slice_length));
    // Host memory needs no synchronisation: no SyncEvent.
    return arrow::ExportDeviceRecordBatch(*batch, /*sync=*/nullptr, out);
  });
}

ARROWCERT_EXPORT int arrowcert_produce_device_stream(const uint8_t* ipc, int64_t ipc_len,
                                                     int32_t device_type,
                                                     int64_t device_id,
                                                     struct ArrowDeviceArrayStream* out) {
  return Guard([&]() -> arrow::Status {
    if (out == nullptr) return arrow::Status::Invalid("out is NULL");
    ARROW_RETURN_NOT_OK(RequireCpu(device_type, device_id));
    ARROW_ASSIGN_OR_RAISE(auto d, Decode(ipc, ipc_len));
    ARROW_ASSIGN_OR_RAISE(auto reader,
                          arrow::RecordBatchReader::Make(std::move(d.batches), d.schema,
                                                         arrow::DeviceAllocationType::kCPU));
    return arrow::ExportDeviceRecordBatchReader(std::move(reader), out);
  });
}

// Errors found before the export starts (NULL handler, unsupported device,
// bad IPC bytes) are returned without calling any handler callback: the
// caller keeps the handler. Once the export thread runs, Arrow C++ owns the
// handler and calls its release.
ARROWCERT_EXPORT int arrowcert_produce_async(const uint8_t* ipc, int64_t ipc_len,
                                             int32_t device_type, int64_t device_id,
                                             struct ArrowAsyncDeviceStreamHandler* handler) {
  return Guard([&]() -> arrow::Status {
    if (handler == nullptr) return arrow::Status::Invalid("handler is NULL");
    ARROW_RETURN_NOT_OK(RequireCpu(device_type, device_id));
    ARROW_ASSIGN_OR_RAISE(auto d, Decode(ipc, ipc_len));
    auto decoded = std::make_shared<Decoded>(std::move(d));
    {
      std::lock_guard<std::mutex> lock(g_jobs_mutex);
      ++g_jobs_running;
    }
    try {
      std::thread([decoded, handler]() mutable {
        try {
          arrow::AsyncGenerator<std::shared_ptr<arrow::RecordBatch>> gen =
              arrow::MakeVectorGenerator(decoded->batches);
          arrow::Future<> done = arrow::ExportAsyncRecordBatchReader(
              decoded->schema, std::move(gen), arrow::DeviceAllocationType::kCPU, handler);
          // The outcome (including a producer-side error already reported
          // through on_error) is Arrow C++'s business; wait for the end so
          // the generator and batches outlive the stream.
          done.Wait();
        } catch (...) {
        }
        decoded.reset();  // free the batches before this job counts as done
        std::lock_guard<std::mutex> lock(g_jobs_mutex);
        --g_jobs_running;
        g_jobs_cv.notify_all();
      }).detach();
    } catch (...) {
      std::lock_guard<std::mutex> lock(g_jobs_mutex);
      --g_jobs_running;
      throw;
    }
    return arrow::Status::OK();
  });
}

}  // extern "C"
