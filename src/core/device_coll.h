// Collectives on device (XPU) buffers: the host schedule of the call, run on host copies of its
// device buffers (staged through Level Zero copy lists), or, for data-movement collectives between
// co-located ranks, device-to-device copies through IPC handles. docs/xpu.md.
#pragma once

#include <memory>

#include "core/device.h"
#include "core/schedule.h"

namespace ccl {

class Communicator;

namespace ze {

// The byte extents of a call's send and recv buffers on this rank.
struct Extents {
    size_t send = 0, recv = 0;
};
Extents extents(const CollSignature& sig, const Buffers& bufs, int rank, int size);

// The schedule to run instead of `host` for a call with these buffers: nullptr when no buffer is
// device memory and there is no stream (run `host` as it is). With `stream`, the copies go on
// the stream, after the work submitted to it before; the call's host part waits for them.
// Call only when active() or with a stream.
std::shared_ptr<const Schedule> device_schedule(Communicator& comm,
                                                const std::shared_ptr<const Schedule>& host,
                                                const Buffers& bufs, Copier* stream);

// Whether any buffer of the call needs staging (for refusing what is not supported yet).
bool has_device_buffer(const CollSignature& sig, const Buffers& bufs, int rank, int size);

}  // namespace ze
}  // namespace ccl
