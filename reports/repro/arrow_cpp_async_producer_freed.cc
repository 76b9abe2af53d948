// Arrow C++ (pyarrow 26.0.1's libarrow): does ExportAsyncRecordBatchReader
// keep the ArrowAsyncProducer it hands to on_schema valid until the
// handler's release? No harness: a plain handler that requests every batch,
// extracts and releases each, and at the end of the stream
// (on_next_task(NULL)) reads handler->producer->device_type. Run it under
// valgrind (arrow_cpp_async_producer_freed.sh builds and runs it).
//
// CDeviceDataInterface.rst, ArrowAsyncProducer lifetime: "It MUST be
// populated before calling any methods other than release and MUST remain
// valid at least until just before calling release on the stream handler
// object."
//
// With `cancel-at-end`, the handler also calls producer->cancel there (the
// harness's `cancel@end` schedules): a call through the freed block.
// With `refuse` as argument, the handler instead refuses the first task
// (calls extract_data(task, NULL), as the spec asks of a consumer that does
// not want the data, and returns EIO): Arrow's loop then reads and frees the
// task block again.
#include <arrow/api.h>
#include <arrow/c/abi.h>
#include <arrow/c/bridge.h>
#include <arrow/util/async_generator.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

static bool g_refuse = false;
static bool g_cancel_at_end = false;
static int g_tasks = 0;

static int OnSchema(ArrowAsyncDeviceStreamHandler* self, ArrowSchema* schema) {
  schema->release(schema);
  // Ask for every batch at once.
  return self->producer->request(self->producer, 1 << 20), 0;
}

static int OnNextTask(ArrowAsyncDeviceStreamHandler* self, ArrowAsyncTask* task,
                      const char*) {
  if (task == nullptr) {
    // End of stream; the handler's release has not been called yet.
    volatile ArrowDeviceType t = self->producer->device_type;  // invalid read?
    std::printf("end of stream: producer->device_type = %d\n", static_cast<int>(t));
    // The producer is still the handler's until its release ("MUST remain
    // valid at least until just before calling release"); cancel goes
    // through freed memory here.
    if (g_cancel_at_end) self->producer->cancel(self->producer);
    return 0;
  }
  ++g_tasks;
  if (g_refuse) {
    task->extract_data(task, nullptr);
    return EIO;
  }
  ArrowDeviceArray out;
  std::memset(&out, 0, sizeof out);
  if (task->extract_data(task, &out) == 0 && out.array.release) out.array.release(&out.array);
  return 0;
}

static void OnError(ArrowAsyncDeviceStreamHandler*, int code, const char* message,
                    const char*) {
  std::printf("on_error(%d, %s)\n", code, message ? message : "(null)");
}

static void Release(ArrowAsyncDeviceStreamHandler* self) {
  std::printf("handler released after %d task(s)\n", g_tasks);
  self->release = nullptr;
}

int main(int argc, char** argv) {
  g_refuse = argc > 1 && std::strcmp(argv[1], "refuse") == 0;
  g_cancel_at_end = argc > 1 && std::strcmp(argv[1], "cancel-at-end") == 0;
  arrow::Int64Builder b;
  for (int i = 0; i < 5; ++i) (void)b.Append(i);
  auto col = b.Finish().ValueOrDie();
  auto schema = arrow::schema({arrow::field("x", arrow::int64())});
  std::vector<std::shared_ptr<arrow::RecordBatch>> batches{
      arrow::RecordBatch::Make(schema, 5, {col}), arrow::RecordBatch::Make(schema, 5, {col})};

  ArrowAsyncDeviceStreamHandler handler;
  std::memset(&handler, 0, sizeof handler);
  handler.on_schema = OnSchema;
  handler.on_next_task = OnNextTask;
  handler.on_error = OnError;
  handler.release = Release;
  auto done = arrow::ExportAsyncRecordBatchReader(
      schema, arrow::MakeVectorGenerator(batches), arrow::DeviceAllocationType::kCPU, &handler);
  done.Wait();
  std::printf("export finished: %s\n", done.status().ToString().c_str());
  return 0;
}
