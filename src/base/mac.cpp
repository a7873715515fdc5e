#include "base/mac.h"

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/params.h>
#include <sys/random.h>

#include <cerrno>
#include <memory>
#include <string>

#include "base/error.h"

namespace ccl {

namespace {

[[noreturn]] void crypto_failed(const char* what) {
    throw Error(CCL_ERROR_SYSTEM, std::string("libcrypto: ") + what + " failed");
}

}  // namespace

void fill_random(uint8_t* out, size_t n, const char* what) {
    size_t got = 0;
    while (got < n) {
        // A few bytes from the urandom pool never block once it is initialised (at boot).
        ssize_t r = getrandom(out + got, n - got, 0);
        if (r < 0) {
            if (errno == EINTR) continue;
            throw_errno(std::string("getrandom for ") + what);
        }
        got += size_t(r);
    }
}

bool equal_constant_time(const uint8_t* a, const uint8_t* b, size_t n) {
    return n == 0 || CRYPTO_memcmp(a, b, n) == 0;
}

Mac hmac_sha256(const uint8_t* key, size_t key_len, std::initializer_list<std::string_view> parts) {
    // The algorithm is fetched once; a context per MAC is cheap next to a KVS round trip. No
    // clean-up at exit: a communicator destroyed by an exit handler may still need a MAC.
    static EVP_MAC* const hmac = [] {
        OPENSSL_init_crypto(OPENSSL_INIT_NO_ATEXIT, nullptr);
        return EVP_MAC_fetch(nullptr, "HMAC", nullptr);
    }();
    if (!hmac) crypto_failed("fetching HMAC");
    struct FreeCtx {
        void operator()(EVP_MAC_CTX* c) const { EVP_MAC_CTX_free(c); }
    };
    std::unique_ptr<EVP_MAC_CTX, FreeCtx> ctx(EVP_MAC_CTX_new(hmac));
    if (!ctx) crypto_failed("EVP_MAC_CTX_new");
    char digest[] = "SHA256";
    OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0),
                           OSSL_PARAM_construct_end()};
    if (!EVP_MAC_init(ctx.get(), key, key_len, params)) crypto_failed("HMAC-SHA-256 init");
    for (std::string_view p : parts) {
        if (!EVP_MAC_update(ctx.get(), reinterpret_cast<const unsigned char*>(p.data()), p.size()))
            crypto_failed("HMAC-SHA-256 update");
    }
    Mac out{};
    size_t len = 0;
    if (!EVP_MAC_final(ctx.get(), out.data(), &len, out.size()) || len != out.size())
        crypto_failed("HMAC-SHA-256 final");
    return out;
}

}  // namespace ccl
