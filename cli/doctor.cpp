// `k3serve doctor [MODEL_DIR | CONFIG.json] [--json]`: can this machine run the model, and how
// fast? Checks the CPU and the kernel set that will run, cores, RAM, cgroup limits, free disk,
// the O_DIRECT read speed measured the way the engine reads (as `diskbench`, briefly), locked
// memory, transparent huge pages and the machine's load; then, for the model (the real Kimi K3
// config built in when none is given), the memory preset that fits, the seconds per token and
// prefill speed to expect from the measured bandwidths, and the command to run next.
// Exit status: 0 when the model can run here, 3 when it cannot (the reasons are printed), 2 for
// usage errors or a config that cannot be read.
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/machine_speed.h"
#include "io/disk_bandwidth.h"
#include "cli/projection.h"
#include "cli/subcommand.h"
#include "weights/chunk_size.h"
#include "k3/cli.h"
#include "k3/error.h"
#include "kernels/kernels.h"
#include "kimi_k3_config.h"
#include "weights/config.h"
#include "store/memory_plan.h"
#include "k3/options.h"

namespace k3::cli {

namespace {

std::string usage() {
    return
                 "usage: k3serve doctor [MODEL_DIR | CONFIG.json] [options]\n"
                 "\n"
                 "Checks whether this machine can run the model and what to expect: CPU and kernel set,\n"
                 "physical cores, RAM and MemAvailable, cgroup limits, free disk, O_DIRECT read speed\n"
                 "(measured briefly, the way the engine reads), locked-memory limit, transparent huge\n"
                 "pages, machine load; then the memory preset that fits, the expected seconds per token\n"
                 "and prefill speed, and the command to run next. Without a model, the real Kimi K3\n"
                 "(built-in config) is assumed, to be stored under --disk (default: the current directory).\n"
                 "\n"
                 "  --disk DIR        where the model (and a packed trunk) would live, if no MODEL_DIR\n"
                 "  --seconds S       time for each read-speed measurement (default 1.5)\n"
                 "  --disk-gbps X     skip the disk measurement and assume X GB/s\n"
                 "  --mem-gbps X      skip the memory-bandwidth measurement and assume X GB/s\n"
                 "  --memory-gb X     plan for X GB of usable memory instead of this machine's\n"
                 "  --prompt-tokens N the prompt whose time to first token each plan shows (default 32768,\n"
                 "                    a coding agent's first prompt)\n"
                 "  --json            one JSON object instead of the report\n"
                 "\n"
                 "Exit status: 0 the model can run here; 3 it cannot (reasons printed); 2 usage or config error.\n";
}

std::string read_file(const std::string& path) {
    std::ifstream in(path);
    if (!in) return "";
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

std::string trim(std::string s) {
    while (!s.empty() && std::isspace((unsigned char)s.back())) s.pop_back();
    size_t i = 0;
    while (i < s.size() && std::isspace((unsigned char)s[i])) ++i;
    return s.substr(i);
}

// A field of /proc/meminfo in bytes (-1 when absent).
int64_t meminfo_bytes(const std::string& key) {
    std::istringstream in(read_file("/proc/meminfo"));
    std::string name;
    int64_t kb;
    std::string unit;
    while (in >> name >> kb) {
        std::getline(in, unit);
        if (name == key + ":") return kb * 1024;
    }
    return -1;
}

std::string cpu_model() {
    std::istringstream in(read_file("/proc/cpuinfo"));
    std::string line;
    while (std::getline(in, line))
        if (line.rfind("model name", 0) == 0) return trim(line.substr(line.find(':') + 1));
    // aarch64 kernels name no model, only the implementer and part codes (MIDR fields).
    std::istringstream again(read_file("/proc/cpuinfo"));
    std::string implementer, part;
    while (std::getline(again, line)) {
        if (implementer.empty() && line.rfind("CPU implementer", 0) == 0) implementer = trim(line.substr(line.find(':') + 1));
        if (part.empty() && line.rfind("CPU part", 0) == 0) part = trim(line.substr(line.find(':') + 1));
    }
    if (!implementer.empty()) return "implementer " + implementer + " part " + part;
    return "unknown";
}

// The cgroup v2 directory of this process ("0::/path" in /proc/self/cgroup).
std::string cgroup_dir() {
    std::istringstream in(read_file("/proc/self/cgroup"));
    std::string line;
    while (std::getline(in, line))
        if (line.rfind("0::", 0) == 0) return "/sys/fs/cgroup" + line.substr(3);
    return "";
}

struct Cgroup {
    int64_t memory_max = -1;  // bytes, -1 = no limit
    double cpus = -1;         // quota / period, -1 = no limit
};

Cgroup read_cgroup() {
    Cgroup cg;
    // The limit that binds is the smallest on the path up to the root.
    for (std::string dir = cgroup_dir(); dir.size() >= std::strlen("/sys/fs/cgroup");) {
        std::string mem = trim(read_file(dir + "/memory.max"));
        if (!mem.empty() && mem != "max") {
            int64_t v = std::stoll(mem);
            if (cg.memory_max < 0 || v < cg.memory_max) cg.memory_max = v;
        }
        std::istringstream cpu(read_file(dir + "/cpu.max"));
        std::string quota;
        double period = 0;
        if (cpu >> quota >> period && quota != "max" && period > 0) {
            double c = std::stod(quota) / period;
            if (cg.cpus < 0 || c < cg.cpus) cg.cpus = c;
        }
        if (dir == "/sys/fs/cgroup") break;
        dir = dir.substr(0, dir.rfind('/'));
    }
    return cg;
}

std::string bracketed_choice(const std::string& path) {
    std::string s = read_file(path);
    auto a = s.find('['), b = s.find(']');
    return a != std::string::npos && b != std::string::npos && b > a ? s.substr(a + 1, b - a - 1) : trim(s);
}

std::string gb(int64_t bytes) { return io::format_gb(bytes); }

struct DoctorOptions {
    std::string target, disk_dir;
    double seconds = 1.5, disk_gbps = 0, mem_gbps = 0, memory_gb = 0, prompt_tokens = 32768;
    bool json = false;
};

// The facts about this machine that decide how the model runs.
struct Machine {
    std::string cpu;
    const char* kernels = "";
    int cores = 0;
    unsigned logical = 0;
    int64_t mem_total = 0, mem_available = 0, usable = 0;
    double mem_gbps = 0;
    double gflops = 0;            // bf16 matmuls, for the prefill estimate
    double attention_gflops = 0;  // blocked attention at the model's widths, for the time to first token
    ModelRates model_rates;       // products and per-token work at the model's widths, for the prefill estimate
    Cgroup cgroup;
    bool memlock_unlimited = false;
    int64_t memlock = 0;
    std::string thp, thp_defrag;
    double load1 = 0;
    Disk disk;
};

// A plan that fits, with what it costs per token.
struct PlanFigures : Projection {
    std::string preset;
    PromptEstimate prompt;  // time to first token of the report's prompt length
};

struct Report {
    ModelSizes model;
    Machine machine;
    std::vector<PlanFigures> plans;                           // fastest first
    std::vector<std::pair<std::string, std::string>> refused; // plan, why
    std::vector<std::string> problems, advice;
    std::string next;
};

// The model to check: a directory, a config file, or the real Kimi K3 built in. `model_dir` is
// where it lives (or would live) and `files` what there is to read from it.
ModelSizes choose_model(const DoctorOptions& o, std::filesystem::path& model_dir, std::vector<std::filesystem::path>& files) {
    const std::filesystem::path elsewhere = o.disk_dir.empty() ? std::filesystem::current_path() : std::filesystem::path(o.disk_dir);
    ModelSizes model;
    if (o.target.empty()) {
        model = sizes_of(parse_config(kKimiK3Config, "built-in Kimi K3 config"), "Kimi K3 (built-in config)");
        model_dir = elsewhere;
    } else if (std::filesystem::is_directory(o.target)) {
        model_dir = o.target;
        model = sizes_of(load_config(model_dir / "config.json"), model_dir.filename().string());
        files = io::bench_files(model_dir);
    } else {
        model = sizes_of(load_config(o.target), o.target);
        model_dir = elsewhere;
    }
    if (!std::filesystem::is_directory(model_dir)) throw Error(ErrorKind::Usage, "no such directory: " + model_dir.string());
    return model;
}

Machine examine_machine(const DoctorOptions& o, const ModelSizes& model, const std::filesystem::path& model_dir,
                        const std::vector<std::filesystem::path>& files) {
    Machine m;
    m.cpu = cpu_model();
    m.kernels = select_kernels().name;
    m.cores = physical_cores();
    m.logical = std::thread::hardware_concurrency();
    m.mem_total = meminfo_bytes("MemTotal");
    m.mem_available = meminfo_bytes("MemAvailable");
    m.cgroup = read_cgroup();
    m.usable = m.mem_available;
    if (m.cgroup.memory_max > 0) m.usable = std::min(m.usable, m.cgroup.memory_max);
    if (o.memory_gb > 0) m.usable = int64_t(o.memory_gb * 1e9);
    struct rlimit memlock {};
    ::getrlimit(RLIMIT_MEMLOCK, &memlock);
    m.memlock_unlimited = memlock.rlim_cur == RLIM_INFINITY;
    m.memlock = m.memlock_unlimited ? -1 : int64_t(memlock.rlim_cur);
    m.thp = bracketed_choice("/sys/kernel/mm/transparent_hugepage/enabled");
    m.thp_defrag = bracketed_choice("/sys/kernel/mm/transparent_hugepage/defrag");
    std::istringstream(read_file("/proc/loadavg")) >> m.load1;
    m.disk = check_disk(model_dir, files, model.one_expert, o.seconds, o.disk_gbps);
    m.mem_gbps = o.mem_gbps > 0 ? o.mem_gbps : measure_memory_gbps(o.seconds / 2);
    m.gflops = measure_gflops(m.cores, std::min(0.3, o.seconds / 2));
    const ModelConfig& c = model.config;
    m.attention_gflops = measure_attention_gflops(m.cores, c.kv_lora_rank + c.qk_rope_head_dim, c.kv_lora_rank,
                                                  std::min(0.3, o.seconds / 2));
    m.model_rates = measure_model_rates(c, m.cores, std::min(1.5, 2 * o.seconds));
    return m;
}

// Every plan that fits in the usable memory (resident, the presets, and the least memory the
// engine can stream the model in), fastest first, with what each costs per token.
void plan(Report& r, int64_t prompt_tokens) {
    const io::ModelFootprint fp = footprint_of(r.model);
    std::vector<std::pair<std::string, io::MemoryPlan>> fits;
    auto try_plan = [&](const std::string& name, double trunk_gb = -1, double cache_gb = -1) {
        MemoryOptions o;
        o.preset = name == "minimal" ? "" : name;
        o.trunk_gb = trunk_gb;
        o.cache_gb = cache_gb;
        try {
            fits.emplace_back(name, io::make_memory_plan(fp, o, r.machine.usable));
        } catch (const Error& e) {
            r.refused.emplace_back(name.empty() ? "resident" : name, e.what());
        }
    };
    try_plan("");
    for (const auto& p : io::memory_presets()) try_plan(std::string(p.name));
    // A read ring that holds the largest layer (one layer at a time) and top-k + 1 expert slots.
    const double min_trunk_gb = double(io::smallest_trunk_budget(fp.layer_alloc_bytes)) / io::kGB;
    const double min_cache_gb = double(fp.experts_per_token + 1) * double(fp.expert_slot_bytes) / io::kGB;
    try_plan("minimal", min_trunk_gb + 1e-6, min_cache_gb + 1e-6);
    // The most weights in memory first (a preset's prefill chunk does not make a plan faster).
    auto weight_bytes = [](const io::MemoryPlan& p) {
        return p.trunk.total_bytes() + int64_t(p.cache_slots) * p.cache_slot_bytes + p.resident_bytes + p.vision_bytes;
    };
    std::stable_sort(fits.begin(), fits.end(),
                     [&](const auto& a, const auto& b) { return weight_bytes(a.second) > weight_bytes(b.second); });
    const Disk& d = r.machine.disk;
    Bandwidths b;
    b.disk_gbps = std::max(d.seq_gbps, 1e-3);
    b.expert_gbps = std::max(d.expert_gbps, 1e-3);
    b.mem_gbps = r.machine.mem_gbps;
    b.gflops = r.machine.gflops;
    b.attention_gflops = 0;  // the model's rates have it, one thread's (chunk_compute.h)
    b.model = r.machine.model_rates;
    for (const auto& [name, p] : fits)
        r.plans.push_back({project(r.model, p, b, p.chunk_tokens), name.empty() ? "resident" : name,
                           estimate_prompt(r.model, p, b, prompt_tokens)});
    if (fits.empty())
        r.problems.push_back("no memory plan fits in " + gb(r.machine.usable) + " usable memory; the smallest, " +
                             r.refused.back().first + ": " + r.refused.back().second);
    if (!r.plans.empty()) {
        const std::string& best = r.plans.front().preset;
        if (best == "minimal")
            r.next += " --trunk-gb " + std::to_string(min_trunk_gb + 0.005).substr(0, 5) + " --cache-gb " +
                      std::to_string(min_cache_gb + 0.005).substr(0, 5);
        else if (best != "resident")
            r.next += " --preset " + best;
    }
}

std::string fixed(double v, int digits = 2) {
    char b[32];
    std::snprintf(b, sizeof b, "%.*f", digits, v);
    return b;
}

// What stands in the way, and what would make it faster.
void advise(Report& r, bool have_files) {
    const Machine& m = r.machine;
    const Disk& d = m.disk;
    if (!have_files && d.free_bytes >= 0 && d.free_bytes < r.model.total())
        r.problems.push_back("the model needs " + gb(r.model.total()) + " of disk and " + d.dir.string() + " has " +
                             gb(d.free_bytes) + " free");
    if (!d.direct)
        r.advice.push_back("O_DIRECT is refused on " + d.dir.string() +
                           " (tmpfs, some network or FUSE filesystems): reads go through the page cache, slower and "
                           "with less predictable memory; keep the model on a local ext4/xfs disk");
    if (!m.memlock_unlimited)
        r.advice.push_back("RLIMIT_MEMLOCK is " + gb(m.memlock) +
                           ": the pinned trunk may be paged out under memory pressure; raise it (LimitMEMLOCK=infinity in "
                           "the unit, --ulimit memlock=-1:-1 in Docker)");
    if (m.thp == "always")
        r.advice.push_back("transparent huge pages are 'always': first-touch compaction can stall loading; 'madvise' is better");
    if (m.load1 > m.cores)
        r.advice.push_back("the load average (" + fixed(m.load1) + ") exceeds the " + std::to_string(m.cores) +
                           " physical cores: other work will slow every token");
    if (m.cgroup.cpus > 0 && m.cgroup.cpus < m.cores)
        r.advice.push_back("the cgroup allows " + fixed(m.cgroup.cpus) + " CPUs: pass --threads " +
                           std::to_string(std::max(1, int(m.cgroup.cpus))));
    if (d.measured && d.seq_gbps < 0.3)
        r.advice.push_back("reads run at " + fixed(d.seq_gbps) + " GB/s: a network disk or an HDD? Expert reads dominate "
                           "streamed decoding");
    if (have_files && !r.plans.empty() && r.plans.front().preset != "resident")
        r.advice.push_back("a packed trunk (k3serve pack-trunk) on the fastest local disk reads the streamed layers in one pass");
}

void print_json(const Report& r) {
    const Machine& m = r.machine;
    nlohmann::json j;
    j["cpu"] = {{"model", m.cpu}, {"kernels", m.kernels}, {"physical_cores", m.cores}, {"logical_cpus", m.logical}};
    j["memory"] = {{"total_bytes", m.mem_total}, {"available_bytes", m.mem_available}, {"usable_bytes", m.usable},
                   {"bandwidth_gbps", m.mem_gbps}};
    j["compute"] = {{"bf16_gflops", m.gflops},
                    {"attention_gflops", m.attention_gflops},
                    {"model_bf16_gflops", rate_at(m.model_rates.bf16_gflops, r.model.config.hidden_size)},
                    {"model_expert_gflops",
                     rate_at(m.model_rates.expert_gflops, tokens_per_expert(r.model.config, chunk_tokens_for(r.model.config)))},
                    {"kda_head_seconds", m.model_rates.work.kda_head_seconds}};
    j["cgroup"] = {{"memory_max_bytes", m.cgroup.memory_max}, {"cpus", m.cgroup.cpus}};
    j["disk"] = {{"dir", m.disk.dir.string()}, {"free_bytes", m.disk.free_bytes}, {"o_direct", m.disk.direct},
                 {"sequential_gbps", m.disk.seq_gbps}, {"expert_read_gbps", m.disk.expert_gbps}, {"note", m.disk.note}};
    j["memlock"] = m.memlock_unlimited ? nlohmann::json("unlimited") : nlohmann::json(m.memlock);
    j["transparent_hugepages"] = {{"enabled", m.thp}, {"defrag", m.thp_defrag}};
    j["load_average_1m"] = m.load1;
    j["model"] = {{"name", r.model.name}, {"total_bytes", r.model.total()}, {"trunk_bytes", r.model.trunk()},
                  {"expert_pool_bytes", r.model.pool}, {"one_expert_bytes", r.model.one_expert}};
    nlohmann::json plans = nlohmann::json::array();
    for (const auto& p : r.plans)
        plans.push_back({{"preset", p.preset}, {"memory_bytes", p.need}, {"disk_bytes_per_token", p.disk_bytes_per_token},
                         {"memory_bytes_per_token", p.memory_bytes_per_token}, {"seconds_per_token", p.seconds_per_token},
                         {"prefill_chunk", p.prefill_chunk}, {"prefill_tokens_per_s", p.prefill_tokens_per_s},
                         {"prefill_chunk_read_s", p.chunk_read_seconds}, {"prefill_chunk_compute_s", p.chunk_compute_seconds},
                         {"prefill_bound", p.chunk_bound}, {"prompt_tokens", p.prompt.tokens},
                         {"prefill_passes", p.prompt.chunks}, {"prefill_pass_tokens", p.prompt.pass_tokens},
                         {"prefill_pass_read_bytes", p.prompt.pass_read_bytes},
                         {"time_to_first_token_s", p.prompt.seconds},
                         {"time_to_first_token_attention_s", p.prompt.attention_seconds}});
    j["plans"] = plans;
    nlohmann::json why = nlohmann::json::array();
    for (const auto& [name, reason] : r.refused) why.push_back({{"preset", name}, {"reason", reason}});
    j["refused"] = why;
    j["recommended"] = r.plans.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.plans.front().preset);
    j["can_run"] = r.problems.empty();
    j["problems"] = r.problems;
    j["advice"] = r.advice;
    j["next"] = r.next;
    std::printf("%s\n", j.dump(2).c_str());
}

void print_text(const Report& r) {
    const Machine& m = r.machine;
    std::printf("machine\n");
    std::printf("  cpu             %s; kernels %s; %d physical cores (%u logical)\n", m.cpu.c_str(), m.kernels, m.cores,
                m.logical);
    std::printf("  memory          %s total, %s available", gb(m.mem_total).c_str(), gb(m.mem_available).c_str());
    if (m.cgroup.memory_max > 0) std::printf(", cgroup limit %s", gb(m.cgroup.memory_max).c_str());
    std::printf("; reads at %.1f GB/s\n", m.mem_gbps);
    if (m.cgroup.cpus > 0) std::printf("  cgroup cpus     %.2f\n", m.cgroup.cpus);
    std::printf("  disk            %s: %s free; O_DIRECT %s; sequential %.2f GB/s, expert reads %.2f GB/s (%s)\n",
                m.disk.dir.string().c_str(), m.disk.free_bytes >= 0 ? gb(m.disk.free_bytes).c_str() : "?",
                m.disk.direct ? "works" : "REFUSED", m.disk.seq_gbps, m.disk.expert_gbps, m.disk.note.c_str());
    std::printf("  memlock         %s\n", m.memlock_unlimited ? "unlimited" : gb(m.memlock).c_str());
    std::printf("  huge pages      enabled [%s], defrag [%s]\n", m.thp.c_str(), m.thp_defrag.c_str());
    std::printf("  load            %.2f (1 min)\n", m.load1);
    std::printf("\nmodel %s: %s in all (trunk %s, expert pool %s)\n", r.model.name.c_str(), gb(r.model.total()).c_str(),
                gb(r.model.trunk()).c_str(), gb(r.model.pool).c_str());
    if (!r.plans.empty()) {
        char ttft[48];
        std::snprintf(ttft, sizeof ttft, "TTFT %lldk (attn)", (long long)(r.plans.front().prompt.tokens / 1000));
        std::printf("  %-12s %12s %16s %14s %16s  %-13s %-18s %s\n", "plan", "memory", "disk/token", "s/token",
                    "prefill tok/s", "prefill bound", ttft, "passes x tokens");
        for (const auto& p : r.plans) {
            char time[48];
            std::snprintf(time, sizeof time, "%.0f s (%.0f s)", p.prompt.seconds, p.prompt.attention_seconds);
            std::printf("  %-12s %12s %16s %14.3f %16.2f  %-13s %-18s %d x %d (%s a pass)\n", p.preset.c_str(),
                        gb(p.need).c_str(), gb(p.disk_bytes_per_token).c_str(), p.seconds_per_token,
                        p.prefill_tokens_per_s, p.chunk_bound.c_str(), time, p.prompt.chunks, p.prompt.pass_tokens,
                        gb(p.prompt.pass_read_bytes).c_str());
        }
        std::printf("  recommended: %s (the fastest plan that fits; figures are first-order estimates from the\n"
                    "  bandwidths above, not measurements of the model)\n",
                    r.plans.front().preset.c_str());
    }
    for (const auto& a : r.advice) std::printf("\nnote: %s\n", a.c_str());
    for (const auto& p : r.problems) std::printf("\nCANNOT RUN: %s\n", p.c_str());
    if (!r.next.empty() && r.problems.empty()) std::printf("\nnext: %s\n", r.next.c_str());
}

}  // namespace

int doctor_main(int argc, char** argv) {
    return run_subcommand({"doctor", usage()}, argc, argv, [](ArgList& args) {
        DoctorOptions o;
        while (args.next()) {
            if (args.is("--json")) o.json = true;
            else if (args.is("--disk")) o.disk_dir = args.value();
            else if (args.is("--seconds")) o.seconds = args.number();
            else if (args.is("--disk-gbps")) o.disk_gbps = args.number();
            else if (args.is("--mem-gbps")) o.mem_gbps = args.number();
            else if (args.is("--memory-gb")) o.memory_gb = args.number();
            else if (args.is("--prompt-tokens")) o.prompt_tokens = args.number();
            else args.positional({&o.target});
        }
        if (!(o.seconds > 0 && o.seconds <= 60)) throw Error(ErrorKind::Usage, "--seconds must be in (0, 60]");
        if (!(o.prompt_tokens >= 1 && o.prompt_tokens <= 1e7))
            throw Error(ErrorKind::Usage, "--prompt-tokens must be in [1, 10000000]");

        Report r;
        std::filesystem::path model_dir;
        std::vector<std::filesystem::path> files;
        r.model = choose_model(o, model_dir, files);
        r.machine = examine_machine(o, r.model, model_dir, files);
        const std::string where = o.target.empty() ? "/srv/models/kimi-k3" : model_dir.string();
        r.next = o.target.empty() ? "k3serve download moonshotai/Kimi-K3 " + where + " && k3serve serve " + where
                                  : "k3serve verify " + where + " && k3serve serve " + where;
        plan(r, int64_t(o.prompt_tokens));
        advise(r, !files.empty());
        if (o.json) print_json(r);
        else print_text(r);
        return r.problems.empty() ? 0 : kExitMachineLacks;
    });
}

}  // namespace k3::cli
