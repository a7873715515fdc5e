// Launcher detection. Each launcher gets a View built from its own variables; then the rules pick
// one. Launchers nest (srun starts mpirun's daemons, mpirun or srun starts torchrun, any of them
// starts cclrun), and the inner one sets its variables explicitly for the processes it starts,
// so the innermost wins:
//   cclrun (CCL_*) > a torchrun agent (TORCHELASTIC_RUN_ID) > Hydra, Open MPI, torchrun-style
//   variables set by a script > Slurm.
// Views at one level must agree on rank and size; disagreeing ones are an error rather than a
// guess, since a wrong rank would only show as a timeout much later.
#include "kvs/launcher.h"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <mutex>
#include <vector>

#include "base/error.h"
#include "base/immortal.h"
#include "base/number.h"

namespace ccl::kvs {
namespace {

// LOCAL_RANK or LOCAL_WORLD_SIZE where no launcher could be told: digits, from `min` to 2^20.
int local_number(const char* var, const char* text, int min) {
    const std::optional<uint64_t> n = parse_decimal(text);
    if (!n || *n < uint64_t(min) || *n > (uint64_t(1) << 20))
        throw Error(CCL_ERROR_INVALID_ARGUMENT, std::string(var) + "='" + text +
                                                    "' is malformed: expected a number from " +
                                                    std::to_string(min) + " to 1048576");
    return int(*n);
}

const char* display_name(Launcher l) {
    switch (l) {
        case Launcher::none: return "no launcher";
        case Launcher::cclrun: return "cclrun";
        case Launcher::hydra: return "MPICH Hydra (mpiexec)";
        case Launcher::ompi: return "Open MPI (mpirun)";
        case Launcher::torchrun: return "torchrun";
        case Launcher::slurm: return "Slurm (srun)";
    }
    return "?";
}

// The environment, with empty values read as unset (a launcher never sets one empty).
class Env {
public:
    explicit Env(const Getenv& getenv) : getenv_(getenv) {}
    const char* get(const char* name) const {
        const char* v = getenv_(name);
        return v && *v ? v : nullptr;
    }
    bool has(const char* name) const { return get(name) != nullptr; }

private:
    const Getenv& getenv_;
};

// One launcher's view of this process. Problems are recorded, not thrown: they matter only if
// the view is used, and a stray variable of an outer launcher must not stop an inner one.
struct View {
    Launcher launcher = Launcher::none;
    bool present = false;              // some of its variables are set
    std::vector<std::string> missing;  // required ones that are not
    std::optional<Error> error;        // a malformed value
    int rank = -1, size = -1, local_rank = 0, local_size = 1;
    std::string vars;  // what was read, "NAME=value ..."
    std::vector<std::string> notes;

    bool usable() const { return present && missing.empty() && !error; }
    std::string says() const {
        return std::string(display_name(launcher)) + " says rank " + std::to_string(rank) + " of " +
               std::to_string(size) + " (" + vars + ")";
    }
};

// Reads an integer in [lo, hi] (lo >= 0) into `out`; records what is wrong in `v` instead.
bool read_int(const Env& env, View& v, const char* name, int lo, int hi, int& out,
              bool required = true) {
    const char* text = env.get(name);
    if (!text) {
        if (required) v.missing.push_back(name);
        return false;
    }
    v.vars += (v.vars.empty() ? "" : " ") + std::string(name) + "=" + text;
    // Strictly digits (base/number.h): " 5", "+3", "-0" or "0x10" is no rank.
    const std::optional<uint64_t> x = parse_decimal(text);
    if (!x || *x < uint64_t(lo) || *x > uint64_t(hi)) {
        if (!v.error)
            v.error = Error(CCL_ERROR_INVALID_ARGUMENT,
                            std::string(name) + "='" + text + "' is not an integer in [" +
                                std::to_string(lo) + ", " + std::to_string(hi) + "]");
        return false;
    }
    out = int(*x);
    return true;
}

// Rank below size, local rank below local size, local size at most size.
void check_ranges(View& v, const char* rank_var, const char* size_var, const char* lrank_var,
                  const char* lsize_var) {
    if (v.error || !v.missing.empty()) return;
    auto bad = [&](const std::string& why) {
        v.error = Error(CCL_ERROR_INVALID_ARGUMENT,
                        std::string(display_name(v.launcher)) + ": " + why + " (" + v.vars + ")");
    };
    if (v.rank >= v.size)
        bad(std::string(rank_var) + " must be below " + size_var);
    else if (v.local_rank >= v.local_size)
        bad(std::string(lrank_var) + " must be below " + lsize_var);
    else if (v.local_size > v.size)
        bad(std::string(lsize_var) + " must not exceed " + size_var);
}

// Local rank and size from an optional pair of variables; absent, 0 of 1 (said in a note: it
// only affects how progress threads are pinned).
void read_local_pair(const Env& env, View& v, const char* lrank_var, const char* lsize_var) {
    bool have_rank = read_int(env, v, lrank_var, 0, INT_MAX, v.local_rank, false);
    bool have_size = read_int(env, v, lsize_var, 1, INT_MAX, v.local_size, false);
    if (v.error) return;
    if (!have_rank && !have_size) {
        v.notes.push_back(std::string(lrank_var) + " and " + lsize_var +
                          " are not set: local rank 0 of 1");
    } else if (!have_size) {
        v.local_size = v.local_rank + 1;
        v.notes.push_back(std::string(lsize_var) + " is not set: taken as " +
                          std::to_string(v.local_size));
    } else if (!have_rank) {
        v.notes.push_back(std::string(lrank_var) + " is not set: taken as 0");
    }
}

View view_cclrun(const Env& env) {
    View v;
    v.launcher = Launcher::cclrun;
    v.present = env.has("CCL_RANK") || env.has("CCL_SIZE") || env.has("CCL_KVS_ADDRESS");
    if (!v.present) return v;
    read_int(env, v, "CCL_RANK", 0, INT_MAX, v.rank);
    read_int(env, v, "CCL_SIZE", 1, INT_MAX, v.size);
    if (!env.has("CCL_KVS_ADDRESS")) v.missing.push_back("CCL_KVS_ADDRESS");
    read_local_pair(env, v, "LOCAL_RANK", "LOCAL_WORLD_SIZE");
    check_ranges(v, "CCL_RANK", "CCL_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE");
    return v;
}

// Rank and size only: MASTER_ADDR and MASTER_PORT are checked when torchrun is chosen (cclrun
// sets RANK and WORLD_SIZE too, without them).
View view_torchrun(const Env& env) {
    View v;
    v.launcher = Launcher::torchrun;
    v.present = env.has("RANK") || env.has("WORLD_SIZE");
    if (!v.present) return v;
    read_int(env, v, "RANK", 0, INT_MAX, v.rank);
    read_int(env, v, "WORLD_SIZE", 1, INT_MAX, v.size);
    read_local_pair(env, v, "LOCAL_RANK", "LOCAL_WORLD_SIZE");
    check_ranges(v, "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE");
    if (const char* id = env.get("TORCHELASTIC_RUN_ID"))
        v.notes.push_back(std::string("started by a torchrun agent (TORCHELASTIC_RUN_ID=") + id +
                          ")");
    return v;
}

// PMI-1 variables: MPICH's Hydra, or Slurm's pmi2 plugin (srun --mpi=pmi2).
View view_pmi(const Env& env) {
    View v;
    v.launcher = Launcher::hydra;
    v.present = env.has("PMI_RANK") || env.has("PMI_SIZE") || env.has("PMI_FD");
    if (!v.present) return v;
    read_int(env, v, "PMI_RANK", 0, INT_MAX, v.rank);
    read_int(env, v, "PMI_SIZE", 1, INT_MAX, v.size);
    int fd = -1;
    read_int(env, v, "PMI_FD", 0, INT_MAX, fd);
    read_local_pair(env, v, "MPI_LOCALRANKID", "MPI_LOCALNRANKS");
    check_ranges(v, "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS");
    return v;
}

View view_ompi(const Env& env) {
    View v;
    v.launcher = Launcher::ompi;
    v.present = env.has("OMPI_COMM_WORLD_RANK") || env.has("OMPI_COMM_WORLD_SIZE") ||
                env.has("OMPI_COMM_WORLD_LOCAL_RANK") || env.has("OMPI_COMM_WORLD_LOCAL_SIZE");
    if (!v.present) return v;
    read_int(env, v, "OMPI_COMM_WORLD_RANK", 0, INT_MAX, v.rank);
    read_int(env, v, "OMPI_COMM_WORLD_SIZE", 1, INT_MAX, v.size);
    read_int(env, v, "OMPI_COMM_WORLD_LOCAL_RANK", 0, INT_MAX, v.local_rank);
    read_int(env, v, "OMPI_COMM_WORLD_LOCAL_SIZE", 1, INT_MAX, v.local_size);
    check_ranges(v, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
                 "OMPI_COMM_WORLD_LOCAL_SIZE");
    return v;
}

// A task of an srun step. A batch script also has SLURM_PROCID (0) but no step variables: it
// is not a rank of anything, unless the user forces Slurm.
View view_slurm(const Env& env, bool forced) {
    View v;
    v.launcher = Launcher::slurm;
    bool step =
        env.has("SLURM_STEP_ID") || env.has("SLURM_STEPID") || env.has("SLURM_STEP_NUM_TASKS");
    v.present = env.has("SLURM_PROCID") && (step || forced);
    if (!v.present) return v;
    read_int(env, v, "SLURM_PROCID", 0, INT_MAX, v.rank);
    const char* size_var =
        env.has("SLURM_STEP_NUM_TASKS") ? "SLURM_STEP_NUM_TASKS" : "SLURM_NTASKS";
    read_int(env, v, size_var, 1, INT_MAX, v.size);
    read_int(env, v, "SLURM_LOCALID", 0, INT_MAX, v.local_rank);
    // The step's own tasks per node first: the allocation's may differ.
    const char* list_var = env.has("SLURM_STEP_TASKS_PER_NODE") ? "SLURM_STEP_TASKS_PER_NODE"
                           : env.has("SLURM_TASKS_PER_NODE")    ? "SLURM_TASKS_PER_NODE"
                                                                : nullptr;
    const char* lsize_var = "SLURM_NTASKS_PER_NODE";
    if (list_var && env.has("SLURM_NODEID")) {
        int node = 0;
        std::string list = env.get(list_var);
        v.vars += std::string(" ") + list_var + "=" + list;
        lsize_var = list_var;
        if (read_int(env, v, "SLURM_NODEID", 0, INT_MAX, node)) {
            if (auto n = tasks_on_node(list, node)) {
                v.local_size = *n;
            } else if (!v.error) {
                v.error = Error(CCL_ERROR_INVALID_ARGUMENT,
                                std::string(list_var) + "='" + list + "' names no task count for " +
                                    "node " + std::to_string(node) + " (SLURM_NODEID)");
            }
        }
    } else if (!read_int(env, v, "SLURM_NTASKS_PER_NODE", 1, INT_MAX, v.local_size, false) &&
               !v.error) {
        v.missing.push_back(
            "SLURM_STEP_TASKS_PER_NODE and SLURM_NODEID (or SLURM_NTASKS_PER_NODE)");
    }
    check_ranges(v, "SLURM_PROCID", size_var, "SLURM_LOCALID", lsize_var);
    return v;
}

std::string joined(const std::vector<std::string>& items, const char* sep) {
    std::string s;
    for (const auto& i : items) s += (s.empty() ? "" : sep) + i;
    return s;
}

// Throws what is wrong with a view that is to be used or compared.
void require_usable(const View& v, const std::string& forced_by = "") {
    if (v.error) throw *v.error;
    if (!v.missing.empty()) {
        std::string lead = forced_by.empty()
                               ? "partial " + std::string(display_name(v.launcher)) + " variables"
                               : forced_by;
        throw Error(CCL_ERROR_INVALID_USAGE,
                    lead + ": " + (v.vars.empty() ? std::string("none") : v.vars) +
                        " set, but not " + joined(v.missing, ", ") +
                        " (docs/launching.md lists what each launcher sets)");
    }
}

bool agree(const View& a, const View& b) { return a.rank == b.rank && a.size == b.size; }

[[noreturn]] void conflict(const View& a, const View& b) {
    throw Error(CCL_ERROR_INVALID_USAGE,
                "conflicting launcher variables: " + a.says() + ", but " + b.says() +
                    ". Unset the stale ones, or set CCL_PROCESS_LAUNCHER to the launcher that "
                    "started this process");
}

// The chosen view, with the way to the KVS address.
Launch finish(const Env& env, const View& v, const LaunchSettings& settings, bool slurm_pmi,
              std::vector<std::string> notes) {
    Launch l;
    l.launcher = v.launcher;
    l.rank = v.rank;
    l.size = v.size;
    l.local_rank = v.local_rank;
    l.local_size = v.local_size;
    notes.insert(notes.begin(), v.notes.begin(), v.notes.end());

    auto master = [&] {
        std::vector<std::string> missing;
        for (const char* n : {"MASTER_ADDR", "MASTER_PORT"})
            if (!env.has(n)) missing.push_back(n);
        if (!missing.empty())
            throw Error(CCL_ERROR_INVALID_USAGE,
                        std::string(display_name(v.launcher)) + " variables (" + v.vars +
                            ") are set, but not " + joined(missing, ", ") +
                            ": rank 0 serves the KVS at MASTER_ADDR, port MASTER_PORT + 1 "
                            "(torchrun sets both; a script must too)");
        View p;  // only for its error reporting
        int master_port = 0;
        read_int(env, p, "MASTER_PORT", 1, 65535, master_port);
        if (p.error) throw *p.error;
        l.via = AddressVia::master;
        l.address = env.get("MASTER_ADDR");
        std::string rule;
        if (settings.kvs_port > 0) {
            l.port = settings.kvs_port;
            rule = "CCL_KVS_PORT";
        } else if (master_port == 65535) {
            throw Error(CCL_ERROR_INVALID_ARGUMENT,
                        "MASTER_PORT=65535 leaves no port for the KVS (MASTER_PORT + 1): set "
                        "CCL_KVS_PORT");
        } else {
            l.port = master_port + 1;
            rule = "MASTER_PORT=" + std::to_string(master_port) + " + 1";
        }
        // No channel carries a secret from rank 0 here: every rank computes the same one.
        std::string auth;
        const char* run_id = env.get("TORCHELASTIC_RUN_ID");
        if (settings.kvs_secret) {
            l.secret = *settings.kvs_secret;
            auth = "the job secret is CCL_KVS_SECRET";
        } else if (run_id && std::string(run_id) != "none") {
            // torchrun --standalone makes it a random UUID; --rdzv-id makes it the user's choice.
            l.secret = derive_secret(std::string("TORCHELASTIC_RUN_ID=") + run_id);
            auth = "the job secret is derived from TORCHELASTIC_RUN_ID (as hard to guess as it is)";
        } else {
            l.secret = derive_secret("ccl: no job secret");
            l.secret_weak = true;
            auth =
                "NO job secret (set CCL_KVS_SECRET to 32 hex digits, the same on every rank): "
                "any process that reaches the port may join";
        }
        return "rank 0 serves the KVS at MASTER_ADDR=" + l.address + ", port " +
               std::to_string(l.port) + " (" + rule + "); " + auth;
    };
    auto pmi = [&] {
        View p;
        read_int(env, p, "PMI_FD", 0, INT_MAX, l.pmi_fd);
        if (p.error) throw *p.error;
        l.via = AddressVia::pmi;
        return std::string(
                   "rank 0 serves the KVS and shares its address through PMI-1 (put, "
                   "barrier, get on PMI_FD=") +
               env.get("PMI_FD") + ")";
    };
    auto pmix = [&] {
        l.via = AddressVia::pmix;
        return std::string(
                   "rank 0 serves the KVS and shares its address through PMIx (put, fence, "
                   "get; PMIX_NAMESPACE=") +
               env.get("PMIX_NAMESPACE") + ")";
    };

    std::string how;
    switch (v.launcher) {
        case Launcher::cclrun:
            l.via = AddressVia::given;
            l.address = env.get("CCL_KVS_ADDRESS");
            how = "cclrun serves the KVS at CCL_KVS_ADDRESS=" + shown_address(l.address) +
                  " (with the job secret cclrun drew)";
            break;
        case Launcher::torchrun: how = master(); break;
        case Launcher::hydra: how = pmi(); break;
        case Launcher::ompi:
            if (!env.has("PMIX_NAMESPACE"))
                throw Error(CCL_ERROR_INVALID_USAGE,
                            "Open MPI started this process without PMIx (PMIX_NAMESPACE is not "
                            "set): ccl shares the KVS address through PMIx, which Open MPI 4 and "
                            "later provide");
            how = pmix();
            break;
        case Launcher::slurm:
            if (slurm_pmi || env.has("PMI_FD")) {
                how = pmi() + ", srun --mpi=pmi2";
            } else if (env.has("PMIX_NAMESPACE")) {
                how = pmix() + ", srun --mpi=pmix";
            } else if (env.has("MASTER_ADDR") || env.has("MASTER_PORT")) {
                how = master();
            } else {
                throw Error(CCL_ERROR_INVALID_USAGE,
                            "srun started this task without PMI (neither PMI_FD nor "
                            "PMIX_NAMESPACE is set), so the ranks cannot share the KVS address: "
                            "run srun --mpi=pmi2 or srun --mpi=pmix (srun --mpi=list shows what "
                            "this cluster offers), or set MASTER_ADDR and MASTER_PORT to rank 0's "
                            "host and a free port");
            }
            break;
        case Launcher::none: break;
    }
    l.why = std::string(launcher_name(v.launcher)) + ": " + v.vars;
    if (!notes.empty()) l.why += "; " + joined(notes, "; ");
    l.why += "; " + how;
    return l;
}

Launch detect_none(const Env& env) {
    View v;
    v.launcher = Launcher::none;
    v.present = true;
    read_local_pair(env, v, "LOCAL_RANK", "LOCAL_WORLD_SIZE");
    if (v.error) throw *v.error;
    if (v.local_rank >= v.local_size)
        throw Error(CCL_ERROR_INVALID_ARGUMENT,
                    "LOCAL_RANK must be below LOCAL_WORLD_SIZE (" + v.vars + ")");
    Launch l;
    l.local_rank = v.local_rank;
    l.local_size = v.local_size;
    l.why =
        "none: forced by CCL_PROCESS_LAUNCHER=none; the application creates or connects to the "
        "KVS and calls ccl_comm_create";
    if (!v.vars.empty()) l.why += "; " + v.vars;
    return l;
}

std::string ignoring(const View& v, const char* why) {
    return "ignoring " + std::string(display_name(v.launcher)) + "'s " + v.vars + " (" + why + ")";
}

}  // namespace

std::optional<int> tasks_on_node(const std::string& list, int node) {
    // Items "N" or "N(xR)", comma-separated.
    size_t pos = 0;
    int first = 0;  // first node of the current item
    while (pos < list.size()) {
        size_t comma = list.find(',', pos);
        const std::string_view item =
            std::string_view(list).substr(pos, comma == std::string::npos ? comma : comma - pos);
        // Strictly digits (base/number.h), as everywhere: "N", or "N(xR)".
        const size_t paren = item.find('(');
        const std::optional<uint64_t> n = parse_decimal(item.substr(0, paren));
        if (!n || *n < 1 || *n > INT_MAX) return std::nullopt;
        const long count = long(*n);
        long repeat = 1;
        if (paren != std::string_view::npos) {
            if (item.size() < paren + 4 || item.substr(paren, 2) != "(x" || item.back() != ')')
                return std::nullopt;
            const std::optional<uint64_t> r =
                parse_decimal(item.substr(paren + 2, item.size() - paren - 3));
            if (!r || *r < 1 || *r > INT_MAX) return std::nullopt;
            repeat = long(*r);
        }
        if (node < first + repeat) return int(count);
        first += int(std::min<long>(repeat, INT_MAX - first));
        if (comma == std::string::npos) break;
        pos = comma + 1;
    }
    return std::nullopt;
}

Launch detect_launch(const Getenv& getenv, const LaunchSettings& settings) {
    Env env(getenv);
    if (settings.forced) {
        Launcher f = *settings.forced;
        if (f == Launcher::none) return detect_none(env);
        View v = f == Launcher::cclrun     ? view_cclrun(env)
                 : f == Launcher::torchrun ? view_torchrun(env)
                 : f == Launcher::hydra    ? view_pmi(env)
                 : f == Launcher::ompi     ? view_ompi(env)
                                           : view_slurm(env, true);
        std::string forced_by = std::string("CCL_PROCESS_LAUNCHER=") + launcher_name(f);
        if (!v.present)
            throw Error(CCL_ERROR_INVALID_USAGE,
                        forced_by + ", but none of " + display_name(f) +
                            "'s variables are set (docs/launching.md lists them)");
        require_usable(v, forced_by);
        return finish(env, v, settings, false, {"forced by " + forced_by});
    }

    View cclrun = view_cclrun(env), torchrun = view_torchrun(env), pmi = view_pmi(env),
         ompi = view_ompi(env), slurm = view_slurm(env, false);
    std::vector<std::string> notes;

    if (cclrun.present) {
        require_usable(cclrun);
        // cclrun sets RANK and WORLD_SIZE itself: different values were changed after it.
        if (torchrun.present && torchrun.usable() && !agree(cclrun, torchrun))
            conflict(cclrun, torchrun);
        for (const View* o : {&pmi, &ompi, &slurm})
            if (o->present) notes.push_back(ignoring(*o, "an outer launcher; cclrun is inner"));
        return finish(env, cclrun, settings, false, notes);
    }
    if (torchrun.present && env.has("TORCHELASTIC_RUN_ID")) {
        require_usable(torchrun);
        for (const View* o : {&pmi, &ompi, &slurm})
            if (o->present)
                notes.push_back(ignoring(*o, "an outer launcher; the torchrun agent is inner"));
        return finish(env, torchrun, settings, false, notes);
    }

    // srun --mpi=pmi2 sets PMI_* agreeing with SLURM_*, without Hydra's MPI_LOCALRANKID: that
    // is Slurm's PMI. Otherwise PMI_* belongs to Hydra (inside an allocation, when SLURM_* is set).
    bool slurm_pmi = pmi.present && slurm.present && !env.has("MPI_LOCALRANKID") && pmi.usable() &&
                     slurm.usable() && agree(pmi, slurm);
    std::vector<const View*> level;
    for (const View* v : {&pmi, &ompi, &torchrun})
        if (v->present && !(v == &pmi && slurm_pmi)) level.push_back(v);
    if (!level.empty()) {
        for (const View* v : level) require_usable(*v);
        for (size_t i = 1; i < level.size(); ++i)
            if (!agree(*level[0], *level[i])) conflict(*level[0], *level[i]);
        for (size_t i = 1; i < level.size(); ++i)
            notes.push_back(std::string("agrees with ") + display_name(level[i]->launcher) + "'s " +
                            level[i]->vars);
        const View& chosen = *level[0];
        if (slurm.present) {
            // mpirun and mpiexec inside an allocation start their ranks through srun-started
            // daemons, so SLURM_* describes the daemons. Variables set by a script have no such
            // excuse: disagreeing with Slurm, they are probably stale.
            if (chosen.launcher == Launcher::torchrun && slurm.usable() && !agree(chosen, slurm))
                conflict(chosen, slurm);
            notes.push_back(ignoring(slurm, "an outer launcher"));
        }
        return finish(env, chosen, settings, false, notes);
    }
    if (slurm.present) {
        require_usable(slurm);
        return finish(env, slurm, settings, slurm_pmi, notes);
    }
    if (env.has("SLURM_PROCID"))
        throw Error(CCL_ERROR_INVALID_USAGE,
                    "SLURM_PROCID is set but no SLURM_STEP_ID: this looks like a Slurm batch "
                    "script, not a task started by srun. Start the ranks with srun (or mpirun, "
                    "torchrun), or set CCL_PROCESS_LAUNCHER=slurm to use these variables anyway");
    // Started by hand: a job of one rank, as MPI's singleton.
    Launch alone;
    alone.via = AddressVia::alone;
    alone.why =
        "no launcher's variables: a job of one rank (start with cclrun, mpiexec (MPICH), mpirun "
        "(Open MPI), torchrun or srun for more; docs/launching.md)";
    return alone;
}

ProcessLaunch detect_process_launch(const Getenv& getenv, const Config& cfg) {
    ProcessLaunch p;
    try {
        p.launch = detect_launch(getenv, {cfg.process_launcher, cfg.kvs_port, cfg.kvs_secret});
        if (p.launch->via != AddressVia::alone) {
            p.local_rank = p.launch->local_rank;
            p.local_size = p.launch->local_size;
            return p;
        }
    } catch (const Error& e) {
        p.error = e;
    }
    // No launcher (a rank started by hand that may join others through ccl_comm_create), or a
    // confused one: where the application says the rank sits, if it does (torchrun's names, else
    // oneCCL's).
    for (const char* name : {"LOCAL_RANK", "CCL_LOCAL_RANK"})
        if (const char* v = getenv(name)) {
            p.local_rank = local_number(name, v, 0);
            break;
        }
    for (const char* name : {"LOCAL_WORLD_SIZE", "CCL_LOCAL_SIZE"})
        if (const char* v = getenv(name)) {
            p.local_size = local_number(name, v, 1);
            break;
        }
    return p;
}

const ProcessLaunch& process_launch() {
    static std::mutex mu;
    static std::optional<ProcessLaunch>& detected = immortal<std::optional<ProcessLaunch>>();
    const Config& cfg = config();  // its errors first, as before any launch is looked at
    std::lock_guard<std::mutex> lock(mu);
    if (!detected)
        detected =
            detect_process_launch([](const char* n) -> const char* { return std::getenv(n); }, cfg);
    return *detected;
}

}  // namespace ccl::kvs
