// Arrow C++ (pyarrow 26.0.1's libarrow) as an async consumer: does the
// reader behind CreateAsyncDeviceStreamHandler call producer->request after
// the handler's release? And after an on_error, does it extract the tasks it
// was given? No harness: a plain producer on the main thread that hands over
// a schema, as many int64 batches as requested (N in all), then the end of
// stream (or on_error after 2 tasks: `error` as argument), then calls the
// handler's release; the consumer reads everything through the generator on
// Arrow's CPU pool. Repeated RUNS times; prints how many runs saw a request
// after release began and how many tasks were never extracted.
//
// CDeviceDataInterface.rst, ArrowAsyncProducer lifetime: "It MUST be
// populated before calling any methods other than release and MUST remain
// valid at least until just before calling release on the stream handler
// object." ... "the producer is responsible for cleaning it up when calling
// the release callback". ArrowAsyncTask: "If the consumer does not care
// about the data that is owned by the task, it must still call extract_data
// so that the producer can perform any required cleanup."
#include <arrow/api.h>
#include <arrow/c/abi.h>
#include <arrow/c/bridge.h>
#include <arrow/util/thread_pool.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <thread>

namespace {
constexpr int kBatches = 4;

struct Producer {
  ArrowAsyncProducer p;
  std::mutex m;
  std::condition_variable cv;
  int64_t requested = 0;
  bool cancelled = false;
  std::atomic<bool> releasing{false};
  std::atomic<int> late_requests{0};
  std::atomic<int> extracted{0};
};

Producer* Of(ArrowAsyncProducer* self) { return static_cast<Producer*>(self->private_data); }

void Request(ArrowAsyncProducer* self, int64_t n) {
  Producer* P = Of(self);
  if (P->releasing) ++P->late_requests;
  std::lock_guard<std::mutex> l(P->m);
  P->requested += n;
  P->cv.notify_all();
}

void Cancel(ArrowAsyncProducer* self) {
  Producer* P = Of(self);
  if (P->releasing) ++P->late_requests;
  std::lock_guard<std::mutex> l(P->m);
  P->cancelled = true;
  P->cv.notify_all();
}

struct Task {
  ArrowAsyncTask t;
  Producer* P;
  std::shared_ptr<arrow::RecordBatch> batch;
};

int Extract(ArrowAsyncTask* self, ArrowDeviceArray* out) {
  auto* T = static_cast<Task*>(self->private_data);
  ++T->P->extracted;
  int rc = 0;
  if (out != nullptr) {
    rc = arrow::ExportDeviceRecordBatch(*T->batch, nullptr, out).ok() ? 0 : EIO;
  }
  delete T;
  return rc;
}

// One exchange; returns (late request seen, tasks never extracted).
std::pair<bool, int> OneRun(bool error, bool slow_error) {
  auto schema = arrow::schema({arrow::field("x", arrow::int64())});
  arrow::Int64Builder b;
  for (int i = 0; i < 8; ++i) (void)b.Append(i);
  auto batch = arrow::RecordBatch::Make(schema, 8, {b.Finish().ValueOrDie()});

  auto* handler = new ArrowAsyncDeviceStreamHandler;
  std::memset(handler, 0, sizeof *handler);
  auto fut = arrow::CreateAsyncDeviceStreamHandler(handler, arrow::internal::GetCpuThreadPool(), 5);

  auto* P = new Producer;
  P->p.device_type = ARROW_DEVICE_CPU;
  P->p.request = Request;
  P->p.cancel = Cancel;
  P->p.additional_metadata = nullptr;
  P->p.private_data = P;
  handler->producer = &P->p;

  // The consumer: read everything on another thread.
  std::thread reader([&fut] {
    auto gen = fut.result();
    if (!gen.ok()) return;
    while (true) {
      auto next = gen->generator().result();
      if (!next.ok() || arrow::IsIterationEnd(*next)) break;
    }
  });

  ArrowSchema s;
  (void)arrow::ExportSchema(*schema, &s);
  int given = 0;
  if (handler->on_schema(handler, &s) == 0) {
    for (int i = 0; i < kBatches; ++i) {
      {
        std::unique_lock<std::mutex> l(P->m);
        P->cv.wait_for(l, std::chrono::seconds(2), [&] { return P->requested > 0 || P->cancelled; });
        if (P->cancelled || P->requested == 0) break;
        --P->requested;
      }
      if (error && i == 2) break;
      auto* T = new Task{{Extract, nullptr}, P, batch};
      T->t.private_data = T;
      ++given;
      if (handler->on_next_task(handler, &T->t, nullptr) != 0) break;
    }
    if (error) {
      if (slow_error) std::this_thread::sleep_for(std::chrono::milliseconds(20));
      handler->on_error(handler, EIO, "producer failed on purpose", nullptr);
    } else {
      handler->on_next_task(handler, nullptr, nullptr);
    }
  }
  // The producer is done: it releases the handler at once (the consumer
  // may still be reading what it queued), as a producer may.
  P->releasing = true;
  handler->release(handler);
  reader.join();
  // Give Arrow's pool a moment to make any late call.
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  std::pair<bool, int> out{P->late_requests > 0, given - P->extracted};
  // The producer structure is leaked on purpose: a late call must not crash.
  delete handler;
  return out;
}
}  // namespace

int main(int argc, char** argv) {
  // end | error | slow-error (on_error 20 ms after the last task)
  bool slow_error = argc > 1 && std::strcmp(argv[1], "slow-error") == 0;
  bool error = slow_error || (argc > 1 && std::strcmp(argv[1], "error") == 0);
  int runs = argc > 2 ? std::atoi(argv[2]) : 200;
  int late = 0, unextracted_runs = 0, unextracted = 0;
  for (int i = 0; i < runs; ++i) {
    auto [l, u] = OneRun(error, slow_error);
    late += l;
    unextracted_runs += u > 0;
    unextracted += u;
  }
  std::printf("%s: %d runs; request/cancel after release began in %d; tasks never extracted: %d (in %d runs)\n",
              slow_error ? "on_error 20 ms after 2 tasks" : error ? "on_error after 2 tasks" : "end of stream", runs, late, unextracted,
              unextracted_runs);
  return 0;
}
