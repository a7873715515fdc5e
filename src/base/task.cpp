#include "base/task.h"

#include <sched.h>

#include <thread>
#include <vector>

namespace ccl {

namespace {

// What `together` waits for: either task's wait being met.
class Either final : public Waiter {
public:
    Either(Task& a, Task& b) : tasks_{&a, &b} {}

    // Resumes each unfinished task that can go on; true once both are done.
    bool advance() {
        for (Task* t : tasks_)
            if (!t->done() && (!t->waiting() || t->waiting()->ready())) t->resume();
        return tasks_[0]->done() && tasks_[1]->done();
    }

    // Each task's ready() throws at its own deadline, so these loops end.
    bool ready() override {
        for (Task* t : tasks_)
            if (!t->done() && t->waiting()->ready()) return true;
        return false;
    }

    // The tasks' own block()s would each watch one condition, so: spin briefly (a message or a
    // peer's flag is often on its way), then yield the core between looks (a transfer over the
    // fabric moves only while someone polls it), then nap.
    void block() override {
        using namespace std::chrono;
        const auto start = steady_clock::now();
        for (;;) {
            if (ready()) return;
            const auto waited = steady_clock::now() - start;
            if (waited < microseconds(50))
                continue;
            else if (waited < milliseconds(50))
                sched_yield();
            else
                std::this_thread::sleep_for(microseconds(50));
        }
    }

    Sleeper sleeper() override {
        std::vector<Sleeper> each;
        for (Task* t : tasks_)
            if (!t->done()) each.push_back(t->waiting()->sleeper());
        return [each = std::move(each)](std::chrono::microseconds max) {
            for (const Sleeper& s : each) s(max / long(each.size()));
        };
    }

    bool await_ready() { return advance(); }
    void await_suspend(Task::Handle h) { h.promise().waiting = this; }
    bool await_resume() { return advance(); }

private:
    Task* tasks_[2];
};

}  // namespace

Task together(Task a, Task b) {
    Either either(a, b);
    while (!co_await either) {
    }
}

}  // namespace ccl
