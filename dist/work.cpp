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

namespace {

// Completes a point-to-point Work on this thread: waits for its message
// (`block`) or tests it once. One thread at a time; the others find it done.
void complete_message(Work::State& w, bool block) {
  std::unique_lock<std::mutex> turn(w.completing, std::defer_lock);
  if (block) {
    turn.lock();
  } else if (!turn.try_lock()) {
    return;  // another thread is completing it
  }
  {
    std::lock_guard<std::mutex> lock(w.mutex);
    if (w.done) return;
  }
  try {
    if (block) {
      w.message->wait();
    } else if (!w.message->test()) {
      return;
    }
    w.source = w.message->source();
    w.finish(nullptr);
  } catch (...) {
    w.finish(std::current_exception());
  }
}

}  // namespace

void Work::wait() const {
  if (!state_) return;
  if (state_->message) complete_message(*state_, true);
  std::unique_lock<std::mutex> lock(state_->mutex);
  state_->done_cv.wait(lock, [&] { return state_->done; });
  if (state_->error) std::rethrow_exception(state_->error);
}

bool Work::is_completed() const {
  if (!state_) return true;
  if (state_->message) complete_message(*state_, false);
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->done;
}

int Work::source_rank() const {
  SCATTERX_CHECK(state_ && state_->is_receive, ArgumentError, "Work::source_rank",
                 "expected the Work of a receive (irecv), got ", state_ ? "the Work of another op" : "an empty Work");
  wait();
  return state_->source;
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

bool Communicator::State::enter_inline() {
  std::lock_guard<std::mutex> lock(mutex);
  if (busy || !queue.empty()) return false;
  busy = true;
  return true;
}

void Communicator::State::leave_inline() {
  {
    std::lock_guard<std::mutex> lock(mutex);
    busy = false;
  }
  cv.notify_all();
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
