#include "dist/internal.h"

namespace scatterx::dist {

void Work::State::finish(std::exception_ptr e) {
  {
    std::lock_guard<std::mutex> lock(mutex);
    error = std::move(e);
    done = true;
  }
  done_cv.notify_all();
}

void Work::wait() const {
  if (!state_) return;
  std::unique_lock<std::mutex> lock(state_->mutex);
  state_->done_cv.wait(lock, [&] { return state_->done; });
  if (state_->error) std::rethrow_exception(state_->error);
}

bool Work::is_completed() const {
  if (!state_) return true;
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->done;
}

Work Communicator::State::submit(std::function<void()> task, bool async) {
  auto work = std::make_shared<Work::State>();
  auto run = [work, task = std::move(task)] {
    try {
      task();
      work->finish(nullptr);
    } catch (...) {
      work->finish(std::current_exception());
    }
  };
  std::unique_lock<std::mutex> lock(mutex);
  if (!threaded || (!async && !busy && queue.empty())) {
    // Nothing queued ahead of it (or no thread to queue on): run here.
    cv.wait(lock, [&] { return !busy && queue.empty(); });
    busy = true;
    lock.unlock();
    run();
    lock.lock();
    busy = false;
    cv.notify_all();
    return Work(work);
  }
  if (!worker.joinable()) worker = std::thread([this] { worker_loop(); });
  queue.push_back(std::move(run));
  cv.notify_all();
  if (!async) {
    lock.unlock();
    Work(work).wait();
  }
  return Work(work);
}

void Communicator::State::worker_loop() {
  std::unique_lock<std::mutex> lock(mutex);
  for (;;) {
    cv.wait(lock, [&] { return stopping || (!busy && !queue.empty()); });
    if (queue.empty() && stopping) return;
    if (busy || queue.empty()) continue;
    auto task = std::move(queue.front());
    queue.pop_front();
    busy = true;
    lock.unlock();
    task();
    lock.lock();
    busy = false;
    cv.notify_all();
  }
}

void Communicator::State::stop_worker() {
  {
    std::lock_guard<std::mutex> lock(mutex);
    stopping = true;
  }
  cv.notify_all();
  if (worker.joinable()) worker.join();
}

}  // namespace scatterx::dist
