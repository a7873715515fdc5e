// Resumable steps. An algorithm is a C++20 coroutine that co_awaits the conditions it needs (a
// peer's flag in shared memory, say); run to completion on the calling thread for a blocking call,
// or advanced a little at a time by a progress worker that interleaves many of them.
#pragma once

#include <chrono>
#include <coroutine>
#include <cstddef>
#include <exception>
#include <functional>
#include <utility>

#include "base/pool.h"

namespace ccl {

// A condition a suspended task waits for.
class Waiter {
public:
    // Checks without blocking. Throws ccl::Error when waiting must stop (deadline, dead peer...).
    virtual bool ready() = 0;
    // Blocks until ready() (spin, yield, then sleep), or throws like ready().
    virtual void block() = 0;
    // How to sleep until the condition may have changed, at most the given time: for a worker
    // with nothing to do. The sleeper must not touch this waiter (the task may move on meanwhile,
    // driven by another thread); the memory it watches must outlive the communicator's work.
    using Sleeper = std::function<void(std::chrono::microseconds max)>;
    virtual Sleeper sleeper() = 0;

protected:
    ~Waiter() = default;
};

class Task {
public:
    struct promise_type {
        Waiter* waiting = nullptr;  // what the task is suspended on, if anything
        std::exception_ptr error;

        Task get_return_object() { return Task(Handle::from_promise(*this)); }
        std::suspend_always initial_suspend() noexcept { return {}; }
        std::suspend_always final_suspend() noexcept { return {}; }
        void return_void() {}
        void unhandled_exception() { error = std::current_exception(); }

        // Every collective call makes one or two frames.
        static void* operator new(size_t bytes) { return pool_alloc(bytes); }
        static void operator delete(void* p, size_t bytes) { pool_free(p, bytes); }
    };
    using Handle = std::coroutine_handle<promise_type>;

    Task() = default;
    explicit Task(Handle h) : h_(h) {}
    Task(Task&& o) noexcept : h_(std::exchange(o.h_, {})) {}
    Task& operator=(Task&& o) noexcept {
        if (this != &o) {
            if (h_) h_.destroy();
            h_ = std::exchange(o.h_, {});
        }
        return *this;
    }
    Task(const Task&) = delete;
    Task& operator=(const Task&) = delete;
    ~Task() {
        if (h_) h_.destroy();
    }

    bool valid() const { return bool(h_); }
    bool done() const { return h_.done(); }
    // What the task waits for; nullptr before its first run.
    Waiter* waiting() const { return h_.promise().waiting; }
    // Runs until the next suspension or the end; rethrows what the task threw.
    void resume() {
        h_.promise().waiting = nullptr;
        h_.resume();
        if (h_.done() && h_.promise().error) std::rethrow_exception(h_.promise().error);
    }
    // Runs to the end on this thread, blocking in each wait.
    void run_blocking() {
        for (;;) {
            resume();
            if (done()) return;
            waiting()->block();
        }
    }

private:
    Handle h_;
};

// What `co_await w` does, outside a coroutine: blocks this thread until `w` is ready. For the
// blocking forms of small algorithms (Step::run).
template <class Awaitable>
void wait_now(Awaitable&& w) {
    if (!w.await_ready()) w.block();
    w.await_resume();
}

// Runs a task inside another: `while (!co_await Nested{inner}) {}` resumes `inner` and suspends
// the outer task on whatever `inner` waits for, until `inner` is done (its failure is rethrown).
// Lets an algorithm be built from others (a node's part, then the leaders', then the node's).
struct Nested {
    Task& inner;
    bool await_ready() {
        inner.resume();
        return inner.done();
    }
    void await_suspend(Task::Handle h) { h.promise().waiting = inner.waiting(); }
    bool await_resume() { return inner.done(); }
};

// Runs two tasks on one thread at once, each resumed whenever what it waits for is met, so that
// one's waits (a transfer over the fabric, say) overlap the other's work. Ends when both have; a
// failure of either is rethrown, and the other is destroyed with this task's frame (its own
// waits' clean-up runs then, as for any abandoned task).
Task together(Task a, Task b);

}  // namespace ccl
