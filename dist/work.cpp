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

namespace {
// Set by stop_worker when the worker thread itself destroys its State.
thread_local bool worker_state_destroyed = false;
}  // namespace

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
    // The task may hold the last reference to this State (the caller let go
    // of the communicator and of the Work): dropping it then runs ~State on
    // this thread, unlocked, and nothing of *this may be touched after.
    task = nullptr;
    if (worker_state_destroyed) return;
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
  if (!worker.joinable()) return;
  if (worker.get_id() == std::this_thread::get_id()) {
    worker.detach();  // see worker_loop: the thread ends as soon as this returns
    worker_state_destroyed = true;
  } else {
    worker.join();
  }
}

}  // namespace scatterx::dist
