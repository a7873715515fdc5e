#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "base/config.h"
#include "base/error.h"
#include "kvs/launcher.h"

namespace {

std::map<std::string, std::string> g_env;
const char* fake_getenv(const char* name) {
    auto it = g_env.find(name);
    return it == g_env.end() ? nullptr : it->second.c_str();
}

ccl::Config parse(std::map<std::string, std::string> env) {
    g_env = std::move(env);
    return ccl::parse_config(fake_getenv);
}

// The launch that environment starts (kvs/launcher.h), with its configuration.
ccl::kvs::ProcessLaunch launched(std::map<std::string, std::string> env) {
    const ccl::Config c = parse(std::move(env));
    return ccl::kvs::detect_process_launch(fake_getenv, c);
}

void expect_rejected(const std::string& name, const std::string& value) {
    try {
        parse({{name, value}});
        ADD_FAILURE() << name << "=" << value << " was accepted";
    } catch (const ccl::Error& e) {
        EXPECT_EQ(e.code(), CCL_ERROR_INVALID_ARGUMENT);
        EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
    }
}

TEST(Config, Defaults) {
    ccl::Config c = parse({});
    EXPECT_EQ(c.timeout_s, 300);
    EXPECT_EQ(c.kvs_timeout_s, 60);
    EXPECT_EQ(c.shm_buffer_size, 1u << 20);
    EXPECT_EQ(c.allreduce_algo, "auto");
    EXPECT_EQ(c.log_level, ccl::LogLevel::warn);
    EXPECT_TRUE(c.bind);
}

// CCL_BIND: whether a rank nobody bound binds itself (core/binding.h).
TEST(Config, Bind) {
    EXPECT_TRUE(parse({{"CCL_BIND", "auto"}}).bind);
    EXPECT_FALSE(parse({{"CCL_BIND", "none"}}).bind);
    expect_rejected("CCL_BIND", "core");
    expect_rejected("CCL_BIND", "");
}

TEST(Config, ParsesValues) {
    ccl::Config c = parse({{"CCL_TIMEOUT", "2.5"},
                           {"CCL_SHM_BUFFER_SIZE", "64K"},
                           {"CCL_LOG_LEVEL", "debug"},
                           {"CCL_ALLREDUCE", "rsag"},
                           {"CCL_ALLREDUCE_DIRECT_MAX", "0"},
                           {"CCL_KVS_IFACE", "lo"}});
    EXPECT_EQ(c.timeout_s, 2.5);
    EXPECT_EQ(c.shm_buffer_size, 64u << 10);
    EXPECT_EQ(c.log_level, ccl::LogLevel::debug);
    EXPECT_EQ(c.allreduce_algo, "rsag");
    EXPECT_EQ(c.allreduce_direct_max, 0u);
    EXPECT_EQ(c.kvs_iface, "lo");
    EXPECT_EQ(parse({{"CCL_SHM_BUFFER_SIZE", "2M"}}).shm_buffer_size, 2u << 20);
    ccl::Config cma = parse({{"CCL_ALLREDUCE", "cma"},
                             {"CCL_ALLREDUCE_CMA_MIN", "1M"},
                             {"CCL_ALLREDUCE_CMA_MAX", "64M"}});
    EXPECT_EQ(cma.allreduce_algo, "cma");
    EXPECT_EQ(cma.allreduce_cma_min, 1u << 20);
    EXPECT_EQ(cma.allreduce_cma_max, 64u << 20);
    EXPECT_EQ(parse({}).cma_min, 0u);            // auto
    EXPECT_EQ(parse({}).allgather_cma_max, 0u);  // auto
    EXPECT_EQ(parse({}).alltoall_cma_max, 0u);
    EXPECT_EQ(parse({{"CCL_ALLGATHER_CMA_MAX", "auto"}}).allgather_cma_max, 0u);
    EXPECT_EQ(parse({{"CCL_ALLGATHER_CMA_MAX", "1G"}}).allgather_cma_max, 1u << 30);
    EXPECT_EQ(parse({{"CCL_ALLTOALL_CMA_MAX", "64K"}}).alltoall_cma_max, 64u << 10);
    EXPECT_EQ(parse({}).poll_time_us, 20000);
    EXPECT_EQ(parse({{"CCL_POLL_TIME_US", "0"}}).poll_time_us, 0);
    EXPECT_EQ(parse({{"CCL_POLL_TIME_US", "500"}}).poll_time_us, 500);
    EXPECT_EQ(parse({{"CCL_CMA_MIN", "auto"}}).cma_min, 0u);
    EXPECT_EQ(parse({{"CCL_CMA_MIN", "32K"}}).cma_min, 32u << 10);
    EXPECT_FALSE(parse({}).allreduce_cma_max_set);
    EXPECT_TRUE(parse({{"CCL_ALLREDUCE_CMA_MAX", "64M"}}).allreduce_cma_max_set);
    EXPECT_EQ(parse({}).rank_threads, 0);  // auto
    EXPECT_EQ(parse({{"CCL_RANK_THREADS", "auto"}}).rank_threads, 0);
    EXPECT_EQ(parse({{"CCL_RANK_THREADS", "3"}}).rank_threads, 3);
    EXPECT_EQ(parse({}).cma_slice, 2u << 20);
    EXPECT_EQ(parse({{"CCL_CMA_SLICE", "4K"}}).cma_slice, 4096u);
}

TEST(Config, RejectsMalformed) {
    expect_rejected("CCL_POLL_TIME_US", "-1");
    expect_rejected("CCL_POLL_TIME_US", "1ms");
    expect_rejected("CCL_POLL_TIME_US", "20000000");
    expect_rejected("CCL_TIMEOUT", "");
    expect_rejected("CCL_TIMEOUT", "abc");
    expect_rejected("CCL_TIMEOUT", "-1");
    expect_rejected("CCL_TIMEOUT", "0");
    expect_rejected("CCL_TIMEOUT", "10s");
    expect_rejected("CCL_TIMEOUT", "nan");
    expect_rejected("CCL_KVS_TIMEOUT", "inf");
    expect_rejected("CCL_LOG_LEVEL", "verbose");
    expect_rejected("CCL_SHM_BUFFER_SIZE", "100");  // below 4K
    expect_rejected("CCL_SHM_BUFFER_SIZE", "64X");
    expect_rejected("CCL_SHM_BUFFER_SIZE", "-64K");
    expect_rejected("CCL_SHM_BUFFER_SIZE", "99999999999G");
    expect_rejected("CCL_ALLREDUCE", "rsga");  // oneCCL's algorithms are taken: Config.OnecclValues
    expect_rejected("CCL_ALLREDUCE_CMA_MIN", "lots");
    expect_rejected("CCL_ALLREDUCE_CMA_MAX", "-1");
    expect_rejected("CCL_ALLGATHER_CMA_MAX", "big");
    expect_rejected("CCL_ALLGATHER_CMA_MAX", "0");
    expect_rejected("CCL_ALLTOALL_CMA_MAX", "-4K");
    expect_rejected("CCL_CMA_MIN", "0");
    expect_rejected("CCL_CMA_MIN", "some");
    expect_rejected("CCL_RANK_THREADS", "0");
    expect_rejected("CCL_RANK_THREADS", "257");
    expect_rejected("CCL_CMA_SLICE", "2K");  // below a page
    expect_rejected("CCL_CMA_SLICE", "3M");  // not a power of two
    expect_rejected("CCL_CMA_SLICE", "2G");
}

}  // namespace

namespace {

// CCL_KVS_SECRET: exactly 32 hex digits; a malformed one is refused without being repeated (it
// is a secret), and reaches the torchrun-style launch.
TEST(Config, KvsSecret) {
    EXPECT_FALSE(parse({}).kvs_secret);
    const std::map<std::string, std::string> env{
        {"CCL_KVS_SECRET", "00112233445566778899aabbccddeeff"},
        {"RANK", "0"},
        {"WORLD_SIZE", "2"},
        {"MASTER_ADDR", "127.0.0.1"},
        {"MASTER_PORT", "29500"}};
    ccl::Config c = parse(env);
    ASSERT_TRUE(c.kvs_secret);
    EXPECT_EQ((*c.kvs_secret)[15], 0xff);
    const ccl::kvs::ProcessLaunch l = launched(env);
    ASSERT_TRUE(l.launch);
    EXPECT_EQ(l.launch->secret, *c.kvs_secret);
    EXPECT_FALSE(l.launch->secret_weak);
    for (const char* bad :
         {"", "0011", "00112233445566778899aabbccddeefX", "00112233445566778899aabbccddeeff00",
          "passphrase-passphrase-passphrase"}) {
        expect_rejected("CCL_KVS_SECRET", bad);
        try {
            parse({{"CCL_KVS_SECRET", bad}});
        } catch (const ccl::Error& e) {
            if (*bad) {
                EXPECT_EQ(std::string(e.what()).find(bad), std::string::npos) << e.what();
            }
        }
    }
}

}  // namespace

namespace {

// XPU (Level Zero) variables, docs/env.md.
TEST(Config, LevelZero) {
    ccl::Config d = parse({});
    EXPECT_TRUE(d.ze_enable);
    EXPECT_FALSE(d.ze_ipc);
    EXPECT_EQ(d.ze_library_path, "");
    EXPECT_EQ(d.ze_pipeline_chunk, 4u << 20);
    ccl::Config c = parse({{"CCL_ZE_ENABLE", "0"},
                           {"CCL_ZE_IPC", "1"},
                           {"CCL_ZE_LIBRARY_PATH", "/opt/ze/libze_loader.so.1"},
                           {"CCL_ZE_PIPELINE_CHUNK", "64K"}});
    EXPECT_FALSE(c.ze_enable);
    EXPECT_TRUE(c.ze_ipc);
    EXPECT_EQ(c.ze_library_path, "/opt/ze/libze_loader.so.1");
    EXPECT_EQ(c.ze_pipeline_chunk, 64u << 10);
    expect_rejected("CCL_ZE_ENABLE", "yes");
    expect_rejected("CCL_ZE_IPC", "2");
    expect_rejected("CCL_ZE_LIBRARY_PATH", "");
    expect_rejected("CCL_ZE_PIPELINE_CHUNK", "1K");
}

}  // namespace

namespace {

TEST(Config, FabricPipelineChunk) {
    EXPECT_EQ(parse({}).fabric_pipeline_chunk, 2u << 20);
    EXPECT_EQ(parse({{"CCL_FABRIC_PIPELINE_CHUNK", "1M"}}).fabric_pipeline_chunk, 1u << 20);
    EXPECT_EQ(parse({{"CCL_FABRIC_PIPELINE_CHUNK", "64K"}}).fabric_pipeline_chunk, 64u << 10);
    expect_rejected("CCL_FABRIC_PIPELINE_CHUNK", "32K");
    expect_rejected("CCL_FABRIC_PIPELINE_CHUNK", "big");
}

}  // namespace

namespace {

// Every numeric CCL_* variable reads digits only (a decimal point where seconds may be
// fractional): a value that would read as something else is refused, naming the variable and
// the value, never guessed at ("0x10" as 0 or 16, " 5" as 5, "-0" as 0).
TEST(Config, NumbersAreStrict) {
    // Each variable with a value it takes, and where its number starts in that value.
    const std::vector<std::pair<std::string, std::string>> numeric = {
        {"CCL_TIMEOUT", "5"},
        {"CCL_KVS_TIMEOUT", "5"},
        {"CCL_KVS_PORT", "29500"},
        {"CCL_SHM_BUFFER_SIZE", "64K"},
        {"CCL_ALLREDUCE_DIRECT_MAX", "16K"},
        {"CCL_ALLREDUCE_CMA_MIN", "1M"},
        {"CCL_ALLREDUCE_CMA_MAX", "64M"},
        {"CCL_CMA_MIN", "32K"},
        {"CCL_ALLGATHER_CMA_MAX", "1G"},
        {"CCL_ALLTOALL_CMA_MAX", "64K"},
        {"CCL_RANK_THREADS", "3"},
        {"CCL_CMA_SLICE", "4K"},
        {"CCL_POLL_TIME_US", "500"},
        {"CCL_WORKER_COUNT", "2"},
        {"CCL_WORKER_AFFINITY", "3"},
        {"CCL_SINGLE_COPY", "1"},
        {"CCL_CACHE_SIZE", "16"},
        {"CCL_ZE_ENABLE", "1"},
        {"CCL_ZE_IPC", "0"},
        {"CCL_FABRIC_PIPELINE_CHUNK", "1M"},
        {"CCL_ZE_PIPELINE_CHUNK", "64K"},
    };
    for (const auto& [name, good] : numeric) {
        SCOPED_TRACE(name + "=" + good);
        EXPECT_NO_THROW(parse({{name, good}}));
        for (const std::string& bad : std::vector<std::string>{
                 " " + good, good + " ", "\t" + good, "+" + good, "-" + good, "0x" + good, "-0",
                 "+0", "0x10", "1e3", good + "\n", "", " ", "1 2", "five"}) {
            try {
                parse({{name, bad}});
                ADD_FAILURE() << name << "='" << bad << "' was accepted";
            } catch (const ccl::Error& e) {
                EXPECT_EQ(e.code(), CCL_ERROR_INVALID_ARGUMENT);
                const std::string what = e.what();
                EXPECT_NE(what.find(name + "='" + bad + "'"), std::string::npos) << what;
            }
        }
    }
    // Seconds may have a fractional part; nothing else may.
    EXPECT_EQ(parse({{"CCL_TIMEOUT", "0.5"}}).timeout_s, 0.5);
    EXPECT_EQ(parse({{"CCL_KVS_TIMEOUT", "007"}}).kvs_timeout_s, 7);
    for (const char* bad : {".5", "5.", "1.2.3", "1,5", "0x1p3", "1e1", "inf", "nan", "5s"})
        expect_rejected("CCL_TIMEOUT", bad);
    expect_rejected("CCL_POLL_TIME_US", "1.5");
    expect_rejected("CCL_SHM_BUFFER_SIZE", "1.5M");
    expect_rejected("CCL_SHM_BUFFER_SIZE", "K");
    expect_rejected("CCL_CACHE_SIZE", "18446744073709551616");  // past 2^64
    // CPU lists: each number strict too.
    EXPECT_EQ(parse({{"CCL_WORKER_AFFINITY", "0,2-3"}}).worker_cpus, (std::vector<int>{0, 2, 3}));
    for (const char* bad : {"0, 2", "0,+2", "2- 3", "0x1", "-1", "1-", ",1", "1,"})
        expect_rejected("CCL_WORKER_AFFINITY", bad);
}

// The launcher's numbers (CCL_RANK, CCL_SIZE, ...) read the same way: a job whose rank reads
// " 1" or "+1" has no launch, and the error says which variable.
TEST(Config, LauncherNumbersAreStrict) {
    for (const char* bad : {" 1", "1 ", "+1", "-0", "0x1", "1e0", "1.0"}) {
        SCOPED_TRACE(bad);
        ccl::kvs::ProcessLaunch c =
            launched({{"CCL_RANK", bad},
                      {"CCL_SIZE", "2"},
                      {"CCL_KVS_ADDRESS", "127.0.0.1:1/00112233445566778899aabbccddeeff"}});
        ASSERT_TRUE(c.error);
        EXPECT_FALSE(c.launch);
        EXPECT_NE(std::string(c.error->what()).find("CCL_RANK"), std::string::npos)
            << c.error->what();
        c = launched({{"CCL_RANK", "0"},
                      {"CCL_SIZE", bad},
                      {"CCL_KVS_ADDRESS", "127.0.0.1:1/00112233445566778899aabbccddeeff"}});
        ASSERT_TRUE(c.error);
        EXPECT_NE(std::string(c.error->what()).find("CCL_SIZE"), std::string::npos)
            << c.error->what();
    }
    ccl::kvs::ProcessLaunch ok =
        launched({{"CCL_RANK", "1"},
                  {"CCL_SIZE", "2"},
                  {"CCL_KVS_ADDRESS", "127.0.0.1:1/00112233445566778899aabbccddeeff"}});
    ASSERT_TRUE(ok.launch) << ok.error->what();
    EXPECT_EQ(ok.launch->rank, 1);
}

}  // namespace

namespace {

// The table of knobs: each variable once, with its values and one line of docs/env.md
// (tests/scripts/check_env_doc.sh holds env.md to it).
TEST(Config, KnobsAreDeclaredOnce) {
    std::set<std::string> names;
    for (const ccl::Knob& k : ccl::knobs()) {
        SCOPED_TRACE(k.name);
        EXPECT_TRUE(names.insert(k.name).second) << "declared twice";
        EXPECT_EQ(std::string(k.name).rfind("CCL_", 0), 0u);
        EXPECT_EQ(ccl::find_knob(k.name), &k);
        EXPECT_TRUE(*k.range && *k.doc && k.show);
        EXPECT_EQ(std::string(k.doc).find('\n'), std::string::npos);
    }
    EXPECT_EQ(ccl::find_knob("CCL_ALLREDUC"), nullptr);
    EXPECT_EQ(knob_markdown(*ccl::find_knob("CCL_TIMEOUT")),
              std::string("| `CCL_TIMEOUT` | `300` | seconds > 0 | ") +
                  ccl::find_knob("CCL_TIMEOUT")->doc + " |");
    EXPECT_EQ(knob_markdown(*ccl::find_knob("CCL_CMA_MIN")).find("| `CCL_CMA_MIN` | `auto` |"), 0u);
    EXPECT_NE(knob_markdown(*ccl::find_knob("CCL_CMA_MIN")).find("[More](tuning.md#ccl_cma_min)."),
              std::string::npos);
}

// A knob's default is what its Config field holds unset, and reads back as the same: the table
// and the struct cannot disagree.
TEST(Config, KnobDefaultsParseToTheDefaults) {
    const ccl::Config unset = parse({});
    for (const ccl::Knob& k : ccl::knobs()) {
        SCOPED_TRACE(k.name);
        const std::string d = ccl::knob_default(k);
        EXPECT_EQ(k.show(unset, nullptr), d);
        if (!k.parse || d[0] == '(') continue;  // read elsewhere, or unset by default
        EXPECT_EQ(k.show(parse({{k.name, d}}), nullptr), d);
    }
}

// What ccl_info shows of a value: as one would set it.
TEST(Config, KnobsShowValuesAsSet) {
    auto shown = [](const char* name, const char* value) {
        const ccl::Knob& k = *ccl::find_knob(name);
        return k.show(parse({{name, value}}), value);
    };
    EXPECT_EQ(shown("CCL_SHM_BUFFER_SIZE", "65536"), "64K");
    EXPECT_EQ(shown("CCL_ALLREDUCE_DIRECT_MAX", "1000"), "1000");
    EXPECT_EQ(shown("CCL_ALLGATHER_CMA_MAX", "2048M"), "2G");
    EXPECT_EQ(shown("CCL_TIMEOUT", "2.5"), "2.5");
    EXPECT_EQ(shown("CCL_TIMEOUT", "10000000"), "10000000");
    EXPECT_EQ(shown("CCL_WORKER_AFFINITY", "4,0,1,2,7"), "4,0-2,7");
    EXPECT_EQ(shown("CCL_BIND", "none"), "none");
    EXPECT_EQ(shown("CCL_PROCESS_LAUNCHER", "ompi"), "ompi");
    EXPECT_EQ(shown("CCL_KVS_SECRET", "00112233445566778899aabbccddeeff"), "(set, not shown)");
    EXPECT_EQ(shown("CCL_KVS_ADDRESS", "10.0.0.1:29500/00112233445566778899aabbccddeeff"),
              "10.0.0.1:29500/(secret not shown)");
    EXPECT_EQ(shown("CCL_RANK", "3"), "3");
}

// CCL_* variables that are no knob, each with the knob it most likely meant, if one is near.
TEST(Config, UnknownVariables) {
    const char* env[] = {"CCL_ALLREDUC=ring", "CCL_TIMEOUT=5", "PATH=/bin",   "CCL_FOOBARBAZ=1",
                         "CCL_timeout=3",     "CCL_RANK=0",    "XCCL_X=1",    "CCL_WORKERS",
                         "CCL_ZE_IPC_=1",     "CCL_FOO=bar",   "CCL_TIMEUOT", nullptr};
    const std::vector<ccl::UnknownVariable> u = ccl::unknown_variables(env);
    ASSERT_EQ(u.size(), 7u);
    auto expect = [&](size_t i, const char* name, const char* nearest) {
        SCOPED_TRACE(name);
        EXPECT_EQ(u[i].name, name);
        EXPECT_STREQ(u[i].nearest ? u[i].nearest->name : "", nearest);
    };
    expect(0, "CCL_ALLREDUC", "CCL_ALLREDUCE");
    expect(1, "CCL_FOOBARBAZ", "");
    expect(2, "CCL_timeout", "CCL_TIMEOUT");
    expect(3, "CCL_WORKERS", "");
    expect(4, "CCL_ZE_IPC_", "CCL_ZE_IPC");
    expect(5, "CCL_FOO", "");  // not CCL_ROOT: two edits of three letters
    expect(6, "CCL_TIMEUOT", "CCL_TIMEOUT");
    EXPECT_EQ(ccl::unknown_text(u[0]),
              "CCL_ALLREDUC is no ccl variable (did you mean CCL_ALLREDUCE?)");
    EXPECT_EQ(ccl::unknown_text(u[1]), "CCL_FOOBARBAZ is no ccl variable");
    EXPECT_TRUE(ccl::unknown_variables(nullptr).empty());
}

// oneCCL's variables (docs/env.md, "oneCCL's variables"): each is taken with one warning saying
// what ccl does instead, by its name before any typo guess (CCL_KVS_MODE is no CCL_KVS_PORT), by
// its family after one (CCL_ALLGATHER_CMA_MX is a typo, CCL_ALLGATHERV_SCALEOUT oneCCL's).
TEST(Config, OnecclVariables) {
    const char* env[] = {"CCL_ATL_TRANSPORT=ofi",
                         "CCL_KVS_MODE=pmi",
                         "CCL_MNIC=global",
                         "CCL_ALLGATHERV_SCALEOUT=x",
                         "CCL_ALLGATHER_CMA_MX=1",
                         "CCL_SYCL_ESIMD=1",
                         "CCL_ZE_CACHE=1",
                         "CCL_WORKER_COUNT=2",
                         nullptr};
    const std::vector<ccl::UnknownVariable> u = ccl::unknown_variables(env);
    ASSERT_EQ(u.size(), 7u);
    for (size_t i : {0, 1, 2, 3, 5, 6}) {
        SCOPED_TRACE(u[i].name);
        EXPECT_TRUE(u[i].oneccl);
        EXPECT_FALSE(u[i].nearest);
        EXPECT_EQ(ccl::unknown_text(u[i]).rfind(u[i].name + " is oneCCL's variable: ", 0), 0u);
    }
    EXPECT_NE(ccl::unknown_text(u[0]).find("libfabric"), std::string::npos)
        << ccl::unknown_text(u[0]);
    EXPECT_EQ(u[4].name, "CCL_ALLGATHER_CMA_MX");
    EXPECT_STREQ(u[4].nearest ? u[4].nearest->name : "", "CCL_ALLGATHER_CMA_MAX");
    EXPECT_FALSE(u[4].oneccl);
}

// oneCCL's values of the knobs both have: never an error, ccl's nearest choice and a note.
TEST(Config, OnecclValues) {
    for (const char* v :
         {"ring", "rabenseifner", "direct:0-8192;ring:8193-max", "2d:0-max", "double_tree;ring"}) {
        SCOPED_TRACE(v);
        const ccl::Config c = parse({{"CCL_ALLREDUCE", v}});
        EXPECT_EQ(c.allreduce_algo, "auto");
        ASSERT_EQ(c.oneccl_values.size(), 1u);
        EXPECT_NE(c.oneccl_values[0].find("oneCCL's"), std::string::npos);
    }
    EXPECT_EQ(parse({{"CCL_ALLREDUCE", "direct"}}).allreduce_algo, "direct");  // ccl's own
    EXPECT_TRUE(parse({{"CCL_ALLREDUCE", "direct"}}).oneccl_values.empty());
    for (const char* v : {"rign", "ring:1", "ring:1-x", "ring;", "ring:1-2;bogus"})
        expect_rejected("CCL_ALLREDUCE", v);
    const ccl::Config pmix = parse({{"CCL_PROCESS_LAUNCHER", "pmix"}});
    EXPECT_FALSE(pmix.process_launcher);
    ASSERT_EQ(pmix.oneccl_values.size(), 1u);
    EXPECT_EQ(parse({{"CCL_PROCESS_LAUNCHER", "torchrun"}}).process_launcher,
              ccl::Launcher::torchrun);
}

// oneCCL's CCL_LOCAL_RANK and CCL_LOCAL_SIZE place a rank no launcher places; torchrun's names
// first.
TEST(Config, OnecclLocalRank) {
    ccl::kvs::ProcessLaunch p = launched({{"CCL_LOCAL_RANK", "2"}, {"CCL_LOCAL_SIZE", "4"}});
    EXPECT_EQ(p.local_rank, 2);
    EXPECT_EQ(p.local_size, 4);
    p = launched({{"CCL_LOCAL_RANK", "2"}, {"LOCAL_RANK", "1"}, {"CCL_LOCAL_SIZE", "4"}});
    EXPECT_EQ(p.local_rank, 1);
}

}  // namespace
