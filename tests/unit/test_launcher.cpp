// Launcher detection (src/kvs/launcher.h) over made-up environments: what each launcher sets,
// launchers nested in one another, partial and conflicting variables, CCL_PROCESS_LAUNCHER, and
// how the result reaches the configuration.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "base/config.h"
#include "base/error.h"
#include "kvs/launcher.h"

namespace {

using ccl::Launcher;
using ccl::kvs::AddressVia;
using ccl::kvs::Launch;
using Env = std::map<std::string, std::string>;

Launch detect(const Env& env, std::optional<Launcher> forced = std::nullopt, int kvs_port = 0,
              std::optional<ccl::kvs::Secret> kvs_secret = std::nullopt) {
    return ccl::kvs::detect_launch(
        [&](const char* name) -> const char* {
            auto it = env.find(name);
            return it == env.end() ? nullptr : it->second.c_str();
        },
        {forced, kvs_port, kvs_secret});
}

// Detection fails with `code`, and the message holds every one of `words`.
void expect_error(const Env& env, ccl_result_t code, std::initializer_list<const char*> words,
                  std::optional<Launcher> forced = std::nullopt) {
    try {
        Launch l = detect(env, forced);
        ADD_FAILURE() << "detected " << ccl::launcher_name(l.launcher) << ": " << l.why;
    } catch (const ccl::Error& e) {
        EXPECT_EQ(e.code(), code) << e.what();
        for (const char* w : words)
            EXPECT_NE(std::string(e.what()).find(w), std::string::npos)
                << "'" << w << "' not in: " << e.what();
    }
}

bool contains(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

// What each launcher sets for the rank 1 of 4 on a node of 2 (rank 0 and 1 on node 0).
const Env kCclrun = {
    {"CCL_RANK", "1"},   {"CCL_SIZE", "4"},   {"CCL_KVS_ADDRESS", "10.0.0.1:5"}, {"RANK", "1"},
    {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "1"}, {"LOCAL_WORLD_SIZE", "2"}};
const Env kHydra = {{"PMI_RANK", "1"},
                    {"PMI_SIZE", "4"},
                    {"PMI_FD", "6"},
                    {"MPI_LOCALRANKID", "1"},
                    {"MPI_LOCALNRANKS", "2"}};
const Env kOmpi = {{"OMPI_COMM_WORLD_RANK", "1"},       {"OMPI_COMM_WORLD_SIZE", "4"},
                   {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
                   {"PMIX_NAMESPACE", "1234"},          {"PMIX_RANK", "1"}};
const Env kTorchrun = {{"RANK", "1"},
                       {"WORLD_SIZE", "4"},
                       {"LOCAL_RANK", "1"},
                       {"LOCAL_WORLD_SIZE", "2"},
                       {"MASTER_ADDR", "node0"},
                       {"MASTER_PORT", "29500"}};
const Env kSrun = {{"SLURM_PROCID", "1"},
                   {"SLURM_STEP_NUM_TASKS", "4"},
                   {"SLURM_NTASKS", "4"},
                   {"SLURM_LOCALID", "1"},
                   {"SLURM_STEP_ID", "0"},
                   {"SLURM_NODEID", "0"},
                   {"SLURM_STEP_TASKS_PER_NODE", "2(x2)"}};

Env merged(Env a, const Env& b) {
    for (const auto& [k, v] : b) a[k] = v;
    return a;
}

void expect_place(const Launch& l, Launcher launcher, int rank, int size, int local_rank,
                  int local_size) {
    EXPECT_EQ(l.launcher, launcher) << l.why;
    EXPECT_EQ(l.rank, rank) << l.why;
    EXPECT_EQ(l.size, size) << l.why;
    EXPECT_EQ(l.local_rank, local_rank) << l.why;
    EXPECT_EQ(l.local_size, local_size) << l.why;
}

// Started by hand: a job of one rank (MPI's singleton) that serves its own KVS.
TEST(Launcher, NothingSetIsAJobOfOne) {
    // Empty values are not values.
    for (const Env& env : {Env{}, Env{{"RANK", ""}, {"PMI_FD", ""}}}) {
        Launch l = detect(env);
        expect_place(l, Launcher::none, 0, 1, 0, 1);
        EXPECT_EQ(l.via, AddressVia::alone);
        for (const char* w : {"a job of one rank", "cclrun", "mpiexec", "torchrun"})
            EXPECT_TRUE(contains(l.why, w)) << l.why;
    }
}

TEST(Launcher, Cclrun) {
    Launch l = detect(kCclrun);
    expect_place(l, Launcher::cclrun, 1, 4, 1, 2);
    EXPECT_EQ(l.via, AddressVia::given);
    EXPECT_EQ(l.address, "10.0.0.1:5");
    EXPECT_TRUE(contains(l.why, "CCL_RANK=1")) << l.why;
}

TEST(Launcher, CclrunPartial) {
    expect_error({{"CCL_RANK", "0"}}, CCL_ERROR_INVALID_USAGE,
                 {"partial", "cclrun", "CCL_SIZE", "CCL_KVS_ADDRESS"});
}

TEST(Launcher, CclrunTorchrunCopiesMustAgree) {
    expect_error(merged(kCclrun, {{"RANK", "2"}}), CCL_ERROR_INVALID_USAGE,
                 {"conflicting", "CCL_RANK=1", "RANK=2", "CCL_PROCESS_LAUNCHER"});
}

TEST(Launcher, CclrunInsideMpiexecWins) {
    Env env = merged(kCclrun, {{"PMI_RANK", "0"}, {"PMI_SIZE", "1"}, {"PMI_FD", "5"}});
    Launch l = detect(env);
    expect_place(l, Launcher::cclrun, 1, 4, 1, 2);
    EXPECT_TRUE(contains(l.why, "ignoring")) << l.why;
}

TEST(Launcher, Hydra) {
    Launch l = detect(kHydra);
    expect_place(l, Launcher::hydra, 1, 4, 1, 2);
    EXPECT_EQ(l.via, AddressVia::pmi);
    EXPECT_EQ(l.pmi_fd, 6);
}

TEST(Launcher, HydraWithoutLocalVariables) {
    Launch l = detect({{"PMI_RANK", "3"}, {"PMI_SIZE", "4"}, {"PMI_FD", "6"}});
    expect_place(l, Launcher::hydra, 3, 4, 0, 1);
    EXPECT_TRUE(contains(l.why, "MPI_LOCALRANKID")) << l.why;
}

TEST(Launcher, HydraPartial) {
    expect_error({{"PMI_RANK", "1"}, {"PMI_SIZE", "4"}}, CCL_ERROR_INVALID_USAGE,
                 {"partial", "PMI_FD"});
}

TEST(Launcher, OpenMpi) {
    Launch l = detect(kOmpi);
    expect_place(l, Launcher::ompi, 1, 4, 1, 2);
    EXPECT_EQ(l.via, AddressVia::pmix);
}

TEST(Launcher, OpenMpiWithoutPmix) {
    Env env = kOmpi;
    env.erase("PMIX_NAMESPACE");
    expect_error(env, CCL_ERROR_INVALID_USAGE, {"PMIx", "PMIX_NAMESPACE"});
}

TEST(Launcher, OpenMpiPartial) {
    expect_error({{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "4"}},
                 CCL_ERROR_INVALID_USAGE, {"partial", "OMPI_COMM_WORLD_LOCAL_RANK"});
}

TEST(Launcher, TorchrunStyle) {
    Launch l = detect(kTorchrun);
    expect_place(l, Launcher::torchrun, 1, 4, 1, 2);
    EXPECT_EQ(l.via, AddressVia::master);
    EXPECT_EQ(l.address, "node0");
    EXPECT_EQ(l.port, 29501);  // MASTER_PORT + 1
    EXPECT_TRUE(contains(l.why, "MASTER_PORT=29500 + 1")) << l.why;
    EXPECT_EQ(detect(kTorchrun, std::nullopt, 4000).port, 4000);  // CCL_KVS_PORT
}

// No channel carries a secret under torchrun-style starts: every rank must compute the same one,
// from CCL_KVS_SECRET, else a TORCHELASTIC_RUN_ID other than torchrun's default "none"; without
// either the job is said to be unprotected.
TEST(Launcher, TorchrunJobSecret) {
    Launch weak = detect(kTorchrun);
    EXPECT_TRUE(weak.secret_weak);
    EXPECT_TRUE(contains(weak.why, "NO job secret")) << weak.why;
    Env none = kTorchrun;
    none["TORCHELASTIC_RUN_ID"] = "none";
    EXPECT_TRUE(detect(none).secret_weak);

    Env run = kTorchrun;
    run["TORCHELASTIC_RUN_ID"] = "3f2b9c1e-uuid";
    Launch a = detect(run), b = detect(run);
    EXPECT_FALSE(a.secret_weak);
    EXPECT_EQ(a.secret, b.secret);  // every rank alike
    EXPECT_NE(a.secret, weak.secret);
    EXPECT_TRUE(contains(a.why, "TORCHELASTIC_RUN_ID")) << a.why;
    run["TORCHELASTIC_RUN_ID"] = "another-run";
    EXPECT_NE(detect(run).secret, a.secret);

    auto given = ccl::kvs::parse_secret_hex("000102030405060708090a0b0c0d0e0f");
    Launch c = detect(run, std::nullopt, 0, given);  // CCL_KVS_SECRET wins
    EXPECT_FALSE(c.secret_weak);
    EXPECT_EQ(c.secret, *given);
    EXPECT_TRUE(contains(c.why, "CCL_KVS_SECRET")) << c.why;
    EXPECT_FALSE(contains(c.why, "000102")) << c.why;  // never shown
}

TEST(Launcher, CclrunAddressSecretNotShown) {
    Env env = {{"CCL_RANK", "0"},
               {"CCL_SIZE", "2"},
               {"CCL_KVS_ADDRESS", "10.0.0.1:5/000102030405060708090a0b0c0d0e0f"}};
    Launch l = detect(env);
    EXPECT_EQ(l.address, "10.0.0.1:5/000102030405060708090a0b0c0d0e0f");
    EXPECT_TRUE(contains(l.why, "10.0.0.1:5")) << l.why;
    EXPECT_FALSE(contains(l.why, "000102")) << l.why;
}

TEST(Launcher, TorchrunLocalVariablesOptional) {
    Launch l =
        detect({{"RANK", "2"}, {"WORLD_SIZE", "4"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", "1000"}});
    expect_place(l, Launcher::torchrun, 2, 4, 0, 1);
    l = detect({{"RANK", "2"},
                {"WORLD_SIZE", "4"},
                {"LOCAL_RANK", "2"},
                {"MASTER_ADDR", "h"},
                {"MASTER_PORT", "1000"}});
    expect_place(l, Launcher::torchrun, 2, 4, 2, 3);
}

TEST(Launcher, TorchrunPartial) {
    expect_error({{"RANK", "0"}}, CCL_ERROR_INVALID_USAGE, {"partial", "torchrun", "WORLD_SIZE"});
    expect_error({{"RANK", "0"}, {"WORLD_SIZE", "2"}}, CCL_ERROR_INVALID_USAGE,
                 {"MASTER_ADDR", "MASTER_PORT"});
    expect_error({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}},
                 CCL_ERROR_INVALID_USAGE, {"MASTER_PORT"});
}

TEST(Launcher, MalformedValues) {
    expect_error(merged(kTorchrun, {{"RANK", "one"}}), CCL_ERROR_INVALID_ARGUMENT, {"RANK='one'"});
    expect_error(merged(kTorchrun, {{"RANK", "4"}}), CCL_ERROR_INVALID_ARGUMENT,
                 {"RANK must be below WORLD_SIZE"});
    expect_error(merged(kTorchrun, {{"LOCAL_RANK", "2"}}), CCL_ERROR_INVALID_ARGUMENT,
                 {"LOCAL_RANK must be below LOCAL_WORLD_SIZE"});
    expect_error(merged(kTorchrun, {{"MASTER_PORT", "0"}}), CCL_ERROR_INVALID_ARGUMENT,
                 {"MASTER_PORT='0'"});
    expect_error(merged(kTorchrun, {{"MASTER_PORT", "65535"}}), CCL_ERROR_INVALID_ARGUMENT,
                 {"CCL_KVS_PORT"});
    expect_error(merged(kHydra, {{"PMI_FD", "-1"}}), CCL_ERROR_INVALID_ARGUMENT, {"PMI_FD"});
    expect_error(merged(kOmpi, {{"OMPI_COMM_WORLD_LOCAL_SIZE", "8"}}), CCL_ERROR_INVALID_ARGUMENT,
                 {"must not exceed"});
}

TEST(Launcher, ScriptVariablesConflictingWithMpi) {
    // A stale RANK in the shell that ran mpirun: each rank would believe it is rank 0.
    Env env = merged(kOmpi, {{"RANK", "0"}, {"WORLD_SIZE", "4"}});
    expect_error(env, CCL_ERROR_INVALID_USAGE,
                 {"conflicting", "OMPI_COMM_WORLD_RANK=1", "RANK=0", "CCL_PROCESS_LAUNCHER"});
    expect_error(merged(kHydra, {{"OMPI_COMM_WORLD_RANK", "2"},
                                 {"OMPI_COMM_WORLD_SIZE", "4"},
                                 {"OMPI_COMM_WORLD_LOCAL_RANK", "0"},
                                 {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}}),
                 CCL_ERROR_INVALID_USAGE, {"conflicting", "PMI_RANK=1", "OMPI_COMM_WORLD_RANK=2"});
}

TEST(Launcher, ScriptVariablesAgreeingWithMpi) {
    Launch l = detect(merged(kOmpi, {{"RANK", "1"}, {"WORLD_SIZE", "4"}}));
    expect_place(l, Launcher::ompi, 1, 4, 1, 2);
    EXPECT_TRUE(contains(l.why, "agrees with torchrun")) << l.why;
}

TEST(Launcher, TorchrunAgentInsideSrun) {
    // srun starts one torchrun agent per node; the agent starts the ranks.
    Env env = merged(kSrun, {{"SLURM_PROCID", "0"}, {"SLURM_STEP_NUM_TASKS", "2"}});
    env = merged(env, kTorchrun);
    env["RANK"] = "3";
    env["TORCHELASTIC_RUN_ID"] = "job7";
    Launch l = detect(env);
    expect_place(l, Launcher::torchrun, 3, 4, 1, 2);
    EXPECT_TRUE(contains(l.why, "TORCHELASTIC_RUN_ID=job7")) << l.why;
    EXPECT_TRUE(contains(l.why, "ignoring Slurm")) << l.why;
    // Without the agent's mark the same variables are a conflict.
    env.erase("TORCHELASTIC_RUN_ID");
    expect_error(env, CCL_ERROR_INVALID_USAGE, {"conflicting", "SLURM_PROCID=0", "RANK=3"});
}

TEST(Launcher, SrunWithPmi2) {
    Launch l = detect(merged(kSrun, {{"PMI_RANK", "1"}, {"PMI_SIZE", "4"}, {"PMI_FD", "9"}}));
    expect_place(l, Launcher::slurm, 1, 4, 1, 2);
    EXPECT_EQ(l.via, AddressVia::pmi);
    EXPECT_EQ(l.pmi_fd, 9);
}

TEST(Launcher, SrunWithPmix) {
    Launch l = detect(merged(kSrun, {{"PMIX_NAMESPACE", "slurm.pmix.7.0"}, {"PMIX_RANK", "1"}}));
    expect_place(l, Launcher::slurm, 1, 4, 1, 2);
    EXPECT_EQ(l.via, AddressVia::pmix);
}

TEST(Launcher, SrunWithoutPmi) {
    expect_error(kSrun, CCL_ERROR_INVALID_USAGE, {"--mpi=pmi2", "--mpi=pmix", "MASTER_ADDR"});
    Launch l = detect(merged(kSrun, {{"MASTER_ADDR", "n0"}, {"MASTER_PORT", "3000"}}));
    expect_place(l, Launcher::slurm, 1, 4, 1, 2);
    EXPECT_EQ(l.via, AddressVia::master);
    EXPECT_EQ(l.port, 3001);
}

TEST(Launcher, SrunLocalSize) {
    // Nodes 0-2 run 3 tasks, node 3 runs 1: the last task is alone on its node.
    Env env = merged(kSrun, {{"SLURM_PROCID", "9"},
                             {"SLURM_STEP_NUM_TASKS", "10"},
                             {"SLURM_LOCALID", "0"},
                             {"SLURM_NODEID", "3"},
                             {"SLURM_STEP_TASKS_PER_NODE", "3(x3),1"},
                             {"PMIX_NAMESPACE", "x"}});
    expect_place(detect(env), Launcher::slurm, 9, 10, 0, 1);
    // SLURM_NTASKS_PER_NODE when there is no per-node list.
    env.erase("SLURM_STEP_TASKS_PER_NODE");
    env.erase("SLURM_NODEID");
    env["SLURM_NTASKS_PER_NODE"] = "3";
    expect_place(detect(env), Launcher::slurm, 9, 10, 0, 3);
    env.erase("SLURM_NTASKS_PER_NODE");
    expect_error(env, CCL_ERROR_INVALID_USAGE, {"partial", "SLURM_NTASKS_PER_NODE"});
}

TEST(Launcher, SrunPartial) {
    Env env = kSrun;
    env.erase("SLURM_LOCALID");
    env["PMIX_NAMESPACE"] = "x";
    expect_error(env, CCL_ERROR_INVALID_USAGE, {"partial", "Slurm", "SLURM_LOCALID"});
}

TEST(Launcher, MpiInsideSlurmAllocation) {
    // mpirun and mpiexec start their ranks through one srun-started daemon per node.
    Env slurm_daemon = merged(kSrun, {{"SLURM_PROCID", "0"},
                                      {"SLURM_STEP_NUM_TASKS", "2"},
                                      {"SLURM_STEP_TASKS_PER_NODE", "1(x2)"},
                                      {"SLURM_LOCALID", "0"}});
    expect_place(detect(merged(slurm_daemon, kOmpi)), Launcher::ompi, 1, 4, 1, 2);
    Launch l = detect(merged(slurm_daemon, kHydra));
    expect_place(l, Launcher::hydra, 1, 4, 1, 2);
    EXPECT_TRUE(contains(l.why, "ignoring Slurm")) << l.why;
}

TEST(Launcher, SlurmBatchScriptIsNoRank) {
    Env batch = {{"SLURM_PROCID", "0"},
                 {"SLURM_NTASKS", "4"},
                 {"SLURM_LOCALID", "0"},
                 {"SLURM_NTASKS_PER_NODE", "4"},
                 {"SLURM_JOB_ID", "77"}};
    expect_error(batch, CCL_ERROR_INVALID_USAGE, {"batch script", "srun"});
    // Forced, it is taken as it is (and still needs a way to share the address).
    expect_error(batch, CCL_ERROR_INVALID_USAGE, {"--mpi=pmi2"}, Launcher::slurm);
    batch["PMI_FD"] = "4";
    expect_place(detect(batch, Launcher::slurm), Launcher::slurm, 0, 4, 0, 4);
}

TEST(Launcher, Forced) {
    // The other launchers' variables are ignored, even when they disagree.
    Env env = merged(kTorchrun, {{"OMPI_COMM_WORLD_RANK", "3"},
                                 {"OMPI_COMM_WORLD_SIZE", "4"},
                                 {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                                 {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
                                 {"PMIX_NAMESPACE", "x"}});
    Launch l = detect(env, Launcher::torchrun);
    expect_place(l, Launcher::torchrun, 1, 4, 1, 2);
    EXPECT_TRUE(contains(l.why, "CCL_PROCESS_LAUNCHER=torchrun")) << l.why;
    expect_place(detect(env, Launcher::ompi), Launcher::ompi, 3, 4, 1, 2);
    // Missing variables of the forced launcher.
    expect_error(kTorchrun, CCL_ERROR_INVALID_USAGE, {"CCL_PROCESS_LAUNCHER=ompi", "Open MPI"},
                 Launcher::ompi);
    expect_error({{"PMI_RANK", "0"}}, CCL_ERROR_INVALID_USAGE,
                 {"CCL_PROCESS_LAUNCHER=hydra", "PMI_SIZE", "PMI_FD"}, Launcher::hydra);
    expect_error(kHydra, CCL_ERROR_INVALID_USAGE, {"CCL_PROCESS_LAUNCHER=cclrun"},
                 Launcher::cclrun);
}

TEST(Launcher, ForcedNone) {
    Launch l =
        detect(merged(kOmpi, {{"LOCAL_RANK", "1"}, {"LOCAL_WORLD_SIZE", "3"}}), Launcher::none);
    EXPECT_EQ(l.launcher, Launcher::none);
    EXPECT_EQ(l.via, AddressVia::none);
    EXPECT_EQ(l.local_rank, 1);
    EXPECT_EQ(l.local_size, 3);
    EXPECT_EQ(detect({}, Launcher::none).launcher, Launcher::none);
}

TEST(Launcher, ParseName) {
    EXPECT_EQ(ccl::parse_launcher("V", "auto"), std::nullopt);
    EXPECT_EQ(ccl::parse_launcher("V", "hydra"), Launcher::hydra);
    EXPECT_EQ(ccl::parse_launcher("V", "none"), Launcher::none);
    try {
        ccl::parse_launcher("CCL_PROCESS_LAUNCHER", "mpich");
        ADD_FAILURE() << "accepted";
    } catch (const ccl::Error& e) {
        EXPECT_EQ(e.code(), CCL_ERROR_INVALID_ARGUMENT);
        EXPECT_TRUE(contains(e.what(), "CCL_PROCESS_LAUNCHER='mpich'")) << e.what();
    }
}

TEST(Launcher, SlurmTasksPerNode) {
    using ccl::kvs::tasks_on_node;
    EXPECT_EQ(tasks_on_node("4", 0), 4);
    EXPECT_EQ(tasks_on_node("4", 1), std::nullopt);
    EXPECT_EQ(tasks_on_node("2(x3),1", 0), 2);
    EXPECT_EQ(tasks_on_node("2(x3),1", 2), 2);
    EXPECT_EQ(tasks_on_node("2(x3),1", 3), 1);
    EXPECT_EQ(tasks_on_node("2(x3),1", 4), std::nullopt);
    EXPECT_EQ(tasks_on_node("1,5,2", 1), 5);
    for (const char* bad : {"", "x", "2(3)", "2(x)", "2(x3", "2(x3)z", "0", "-1", "2(x0)", " 2",
                            "+2", "0x2", "2(x 3)", "2(x+3)"})
        EXPECT_EQ(tasks_on_node(bad, 0), std::nullopt) << bad;
    EXPECT_EQ(tasks_on_node("2,,3", 1), std::nullopt);
}

// The configuration takes its local rank and size from the launcher, so that progress threads
// are pinned by launcher the same way.
ccl::kvs::ProcessLaunch parse_config(Env env) {
    static Env current;
    current = std::move(env);
    auto getenv = [](const char* n) -> const char* {
        auto it = current.find(n);
        return it == current.end() ? nullptr : it->second.c_str();
    };
    return ccl::kvs::detect_process_launch(getenv, ccl::parse_config(getenv));
}

TEST(LauncherConfig, LocalPlacementFromLauncher) {
    ccl::kvs::ProcessLaunch c = parse_config(kOmpi);
    ASSERT_TRUE(c.launch);
    EXPECT_EQ(c.launch->launcher, Launcher::ompi);
    EXPECT_EQ(c.local_rank, 1);
    EXPECT_EQ(c.local_size, 2);
    c = parse_config(merged(kSrun, {{"PMIX_NAMESPACE", "x"}}));
    EXPECT_EQ(c.local_rank, 1);
    EXPECT_EQ(c.local_size, 2);
}

// A rank started by hand keeps the place LOCAL_RANK gives it (its application may join others
// through ccl_comm_create): its progress threads are pinned by it.
TEST(LauncherConfig, AJobOfOneStillPlacedByLocalRank) {
    ccl::kvs::ProcessLaunch c = parse_config({{"LOCAL_RANK", "1"}, {"LOCAL_WORLD_SIZE", "3"}});
    ASSERT_TRUE(c.launch);
    EXPECT_EQ(c.launch->size, 1);
    EXPECT_EQ(c.local_rank, 1);
    EXPECT_EQ(c.local_size, 3);
}

TEST(LauncherConfig, NoLauncherIsNotAConfigError) {
    ccl::kvs::ProcessLaunch c =
        parse_config({{"RANK", "0"}, {"LOCAL_RANK", "2"}, {"LOCAL_WORLD_SIZE", "4"}});
    EXPECT_FALSE(c.launch);
    ASSERT_TRUE(c.error);
    EXPECT_EQ(c.error->code(), CCL_ERROR_INVALID_USAGE);
    EXPECT_EQ(c.local_rank, 2);  // LOCAL_RANK still places it
    EXPECT_EQ(c.local_size, 4);
}

TEST(LauncherConfig, Variables) {
    ccl::kvs::ProcessLaunch c = parse_config(
        merged(kTorchrun, {{"CCL_PROCESS_LAUNCHER", "torchrun"}, {"CCL_KVS_PORT", "7000"}}));
    ASSERT_TRUE(c.launch);
    EXPECT_EQ(c.launch->launcher, Launcher::torchrun);
    EXPECT_EQ(c.launch->port, 7000);
    c = parse_config({{"CCL_PROCESS_LAUNCHER", "auto"}});
    ASSERT_TRUE(c.launch);
    EXPECT_EQ(c.launch->via, AddressVia::alone);
    for (const Env& bad : {Env{{"CCL_PROCESS_LAUNCHER", "srun"}}, Env{{"CCL_KVS_PORT", "0"}},
                           Env{{"CCL_KVS_PORT", "65536"}}, Env{{"CCL_KVS_PORT", "http"}}}) {
        try {
            parse_config(bad);
            ADD_FAILURE() << bad.begin()->first << "=" << bad.begin()->second << " accepted";
        } catch (const ccl::Error& e) {
            EXPECT_EQ(e.code(), CCL_ERROR_INVALID_ARGUMENT);
            EXPECT_TRUE(contains(e.what(), bad.begin()->first.c_str())) << e.what();
        }
    }
}

}  // namespace
