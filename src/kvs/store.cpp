#include "kvs/store.h"

#include <algorithm>

namespace ccl::kvs {

using protocol::Op;
using protocol::Reply;
using protocol::Request;

std::vector<Store::Delivery> Store::handle(ConnId conn, const Request& req) {
    switch (req.op) {
        case Op::put: return put(conn, req);
        case Op::get: return get(conn, req);
        case Op::barrier: return barrier(conn, req);
        case Op::hello:
        case Op::proof: break;  // the handshake is the server's own business
    }
    return {{conn, Reply{CCL_ERROR_INTERNAL, "unknown KVS operation"}}};
}

std::optional<Reply> Store::over_limit(size_t more, size_t bytes) const {
    size_t entries = values_.size() + barriers_.size();
    if (entries + more <= max_entries_ && bytes_ + bytes <= max_bytes_) return std::nullopt;
    return Reply{CCL_ERROR_OUT_OF_MEMORY, "the KVS is full: it holds " + std::to_string(entries) +
                                              " keys and barriers (" + std::to_string(bytes_) +
                                              " bytes), the limits are " +
                                              std::to_string(max_entries_) + " and " +
                                              std::to_string(max_bytes_) + " bytes"};
}

std::vector<Store::Delivery> Store::put(ConnId conn, const Request& req) {
    auto old = values_.find(req.key);
    size_t old_bytes = old == values_.end() ? 0 : old->first.size() + old->second.size();
    size_t new_bytes = req.key.size() + req.value.size();
    if (auto refused = over_limit(old == values_.end() ? 1 : 0,
                                  new_bytes > old_bytes ? new_bytes - old_bytes : 0)) {
        return {{conn, *refused}};
    }
    bytes_ = bytes_ - old_bytes + new_bytes;
    std::vector<Delivery> out;
    out.push_back({conn, Reply{}});
    if (auto it = waiting_gets_.find(req.key); it != waiting_gets_.end()) {
        for (ConnId waiter : it->second) {
            out.push_back({waiter, Reply{CCL_SUCCESS, req.value}});
            parked_.erase(waiter);
        }
        waiting_gets_.erase(it);
    }
    values_[req.key] = req.value;
    return out;
}

std::vector<Store::Delivery> Store::get(ConnId conn, const Request& req) {
    if (auto it = values_.find(req.key); it != values_.end()) {
        return {{conn, Reply{CCL_SUCCESS, it->second}}};
    }
    waiting_gets_[req.key].push_back(conn);
    parked_[conn] = Parked{Op::get, req.key};
    return {};
}

std::vector<Store::Delivery> Store::barrier(ConnId conn, const Request& req) {
    if (!barriers_.count(req.key)) {
        if (auto refused = over_limit(1, req.key.size())) return {{conn, *refused}};
        bytes_ += req.key.size();
    }
    Barrier& b = barriers_[req.key];
    if (b.nranks == 0) b.nranks = req.nranks;  // the first arrival fixes the size
    auto refuse = [&](std::string why) {
        return std::vector<Delivery>{
            {conn, Reply{CCL_ERROR_INVALID_USAGE, "barrier '" + req.key + "' " + std::move(why)}}};
    };
    if (b.done) {
        return refuse("has already completed with " + std::to_string(b.nranks) +
                      " ranks (each barrier name is used once)");
    }
    if (req.nranks != b.nranks) {
        return refuse("entered with nranks " + std::to_string(req.nranks) +
                      " but earlier arrivals said " + std::to_string(b.nranks));
    }
    b.waiting.push_back(conn);
    if (b.waiting.size() < b.nranks) {
        parked_[conn] = Parked{Op::barrier, req.key};
        return {};
    }
    std::vector<Delivery> out;
    for (ConnId waiter : b.waiting) {
        out.push_back({waiter, Reply{}});
        parked_.erase(waiter);
    }
    b.waiting.clear();
    b.waiting.shrink_to_fit();
    b.done = true;
    return out;
}

void Store::drop(ConnId conn) {
    auto it = parked_.find(conn);
    if (it == parked_.end()) return;
    auto remove_from = [conn](std::vector<ConnId>& v) { std::erase(v, conn); };
    if (it->second.op == Op::get) {
        if (auto w = waiting_gets_.find(it->second.key); w != waiting_gets_.end()) {
            remove_from(w->second);
            if (w->second.empty()) waiting_gets_.erase(w);
        }
    } else if (auto b = barriers_.find(it->second.key); b != barriers_.end()) {
        remove_from(b->second.waiting);
        // Nobody left waiting: the next arrival may pick the size again.
        if (b->second.waiting.empty() && !b->second.done) {
            bytes_ -= b->first.size();
            barriers_.erase(b);
        }
    }
    parked_.erase(it);
}

}  // namespace ccl::kvs
