// The tests' side of Level Zero: device, host and shared allocations through the real loader,
// written and read back with copies (never by dereferencing device memory).
#pragma once

#include <gtest/gtest.h>
#include <level_zero/ze_api.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace test {

struct ZeEnv {
    bool ok = false;
    ze_driver_handle_t driver = nullptr;
    ze_device_handle_t device = nullptr;
    ze_context_handle_t context = nullptr;
    ze_command_list_handle_t list = nullptr;  // synchronous immediate: copies done on return
};

inline ZeEnv& ze() {
    static ZeEnv env = [] {
        ZeEnv e;
        if (zeInit(0) != ZE_RESULT_SUCCESS) return e;
        uint32_t n = 1;
        if (zeDriverGet(&n, &e.driver) != ZE_RESULT_SUCCESS || n == 0) return e;
        n = 1;
        if (zeDeviceGet(e.driver, &n, &e.device) != ZE_RESULT_SUCCESS || n == 0) return e;
        ze_context_desc_t cd{ZE_STRUCTURE_TYPE_CONTEXT_DESC, nullptr, 0};
        if (zeContextCreate(e.driver, &cd, &e.context) != ZE_RESULT_SUCCESS) return e;
        ze_command_queue_desc_t qd{ZE_STRUCTURE_TYPE_COMMAND_QUEUE_DESC,
                                   nullptr,
                                   0,
                                   0,
                                   0,
                                   ZE_COMMAND_QUEUE_MODE_SYNCHRONOUS,
                                   ZE_COMMAND_QUEUE_PRIORITY_NORMAL};
        if (zeCommandListCreateImmediate(e.context, e.device, &qd, &e.list) != ZE_RESULT_SUCCESS)
            return e;
        e.ok = true;
        return e;
    }();
    return env;
}

#define ZE_OK(call) ASSERT_EQ((call), ZE_RESULT_SUCCESS) << #call

enum class Mem { plain, device, host, shared };
inline const char* mem_name(Mem m) {
    switch (m) {
        case Mem::plain: return "plain";
        case Mem::device: return "device";
        case Mem::host: return "ze-host";
        case Mem::shared: return "shared";
    }
    return "?";
}

// Whether this process's host code could read p (device memory: no).
inline bool host_readable(const void* p) {
    char c;
    iovec local{&c, 1}, remote{const_cast<void*>(p), 1};
    return ::process_vm_readv(::getpid(), &local, 1, &remote, 1, 0) == 1 || errno != EFAULT;
}

// A buffer of some kind of memory, filled and read through copies.
class Buf {
public:
    Buf(Mem kind, size_t bytes) : kind_(kind), bytes_(bytes ? bytes : 1) {
        if (kind == Mem::plain) {
            plain_.resize(bytes_);
            p_ = plain_.data();
            return;
        }
        ZeEnv& e = ze();
        ze_device_mem_alloc_desc_t dd{ZE_STRUCTURE_TYPE_DEVICE_MEM_ALLOC_DESC, nullptr, 0, 0};
        ze_host_mem_alloc_desc_t hd{ZE_STRUCTURE_TYPE_HOST_MEM_ALLOC_DESC, nullptr, 0};
        ze_result_t r = ZE_RESULT_ERROR_UNKNOWN;
        if (kind == Mem::device)
            r = zeMemAllocDevice(e.context, &dd, bytes_, 64, e.device, &p_);
        else if (kind == Mem::host)
            r = zeMemAllocHost(e.context, &hd, bytes_, 64, &p_);
        else
            r = zeMemAllocShared(e.context, &dd, &hd, bytes_, 64, e.device, &p_);
        if (r != ZE_RESULT_SUCCESS) {
            ADD_FAILURE() << "allocating " << bytes_ << " bytes of " << mem_name(kind) << ": " << r;
            p_ = nullptr;
        }
    }
    ~Buf() {
        if (kind_ != Mem::plain && p_) zeMemFree(ze().context, p_);
    }
    Buf(const Buf&) = delete;
    Buf& operator=(const Buf&) = delete;

    char* data() const { return static_cast<char*>(p_); }
    size_t size() const { return bytes_; }
    void write(const void* src, size_t bytes, size_t offset = 0) {
        ASSERT_LE(offset + bytes, bytes_);
        ZE_OK(zeCommandListAppendMemoryCopy(ze().list, data() + offset, src, bytes, nullptr, 0,
                                            nullptr));
    }
    std::vector<char> read(size_t bytes, size_t offset = 0) const {
        std::vector<char> out(bytes);
        EXPECT_LE(offset + bytes, bytes_);
        EXPECT_EQ(zeCommandListAppendMemoryCopy(ze().list, out.data(), data() + offset, bytes,
                                                nullptr, 0, nullptr),
                  ZE_RESULT_SUCCESS);
        return out;
    }

private:
    Mem kind_;
    size_t bytes_;
    void* p_ = nullptr;
    std::vector<char> plain_;
};

}  // namespace test
