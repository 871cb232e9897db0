// kvscope bench --kv-tiers: what the KV tiers (engine/kv_cache/kv_tiers.h) save on a long
// shared system prompt. Each repetition measures the time to first token of the system
// prompt + a short question, the question different each time, four ways, in an order that
// rotates with the repetition:
//   cold       a fresh engine without tiers: the whole prompt is computed;
//   cpu        an engine with a CPU tier that ran the system prompt once (another
//              question), then a filler prompt that took the whole device pool, so every
//              cached block of the system prompt was evicted into the CPU tier;
//   disk       the same on an engine with a disk store only, destroyed, then a new engine
//              (CPU tier and disk store, same folder): the blocks come from the files;
//   disk-cold  as disk, with the files' pages dropped from the OS page cache
//              (fdatasync + posix_fadvise DONTNEED) before the new engine starts.
// TTFT is the engine's one measurement (RequestMetrics: submit to first token), so the
// tier lookups, file reads and block copies are inside it. The device pool is sized to
// hold the prompt and little more; the disk store lives in a fresh folder under the KV
// cache root (removed at the end) unless --kv-disk-dir names one.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "app/cli/commands.h"
#include "engine/kv_cache/kv_tiers.h"

namespace kvs::app {
namespace {

namespace fs = std::filesystem;

struct TimedRun {
    double ttft_ms = 0;
    int64_t cpu_hit_tokens = 0, disk_hit_tokens = 0;
};

std::string read_text(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

// Runs one request to its first token; the engine's TTFT and the tier hits it took.
Result<TimedRun> time_first_token(Engine& e, const std::vector<int32_t>& prompt) {
    const KVCacheStats before = e.kv_cache().stats();
    GenerationRequest g;
    g.prompt = prompt;
    g.params.max_tokens = 1;
    g.params.temperature = 0;
    g.params.ignore_eos = true;
    auto id = e.submit(std::move(g));
    if (!id) return id.status();
    KVS_RETURN_IF_ERROR(e.run_until_idle());
    const RequestMetrics* m = e.request_metrics(*id);
    if (!m || m->ttft_ms() < 0) return Result<TimedRun>::error("the request produced no token");
    const KVCacheStats after = e.kv_cache().stats();
    return TimedRun{m->ttft_ms(), after.cpu_hit_tokens - before.cpu_hit_tokens,
                    after.disk_hit_tokens - before.disk_hit_tokens};
}

// Drops a folder's files from the page cache, so the next read comes from the device.
void drop_page_cache(const std::string& folder) {
    std::error_code ec;
    for (const auto& f : fs::directory_iterator(folder, ec)) {
        const int fd = ::open(f.path().c_str(), O_RDONLY);
        if (fd < 0) continue;
        ::fdatasync(fd);
        ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
        ::close(fd);
    }
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n == 0 ? 0 : n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

int cmd_bench_tiers(const BenchOptions& o) {
    auto session = open_session_or_report(o.model);
    if (!session) return 1;
    auto fail = [](const std::string& what) {
        std::fprintf(stderr, "error: %s\n", what.c_str());
        return 1;
    };
    // The system prompt: the first tier_prompt tokens of the GPL; the filler: the Apache licence.
    std::string gpl = read_text("/usr/share/common-licenses/GPL-3");
    std::string apache = read_text("/usr/share/common-licenses/Apache-2.0");
    if (gpl.size() < 1000 || apache.size() < 1000) return fail("the licence texts in /usr/share/common-licenses are missing");
    std::vector<int32_t> sys_ids = session->encode_text(gpl);
    if (static_cast<int>(sys_ids.size()) > o.tier_prompt + 1) sys_ids.resize(static_cast<size_t>(o.tier_prompt) + 1);
    const std::string system = session->decode(std::vector<int32_t>(sys_ids.begin() + 1, sys_ids.end()));
    auto prompt_for = [&](int k) {
        return session->encode_user("Question " + std::to_string(k) + ": in one sentence, what does section " +
                                        std::to_string(k % 17 + 1) + " of this licence say?",
                                    system);
    };
    const std::vector<int32_t> warm_prompt = prompt_for(1000);
    const int n_prompt = static_cast<int>(prompt_for(0).size());

    EngineOptions base = engine_options_from(o.runner);
    const int bs = base.block_size;
    // The pool holds the prompt and a few blocks more; the filler takes all of it.
    base.kv_blocks = (n_prompt + 64 + bs - 1) / bs + 4;
    const int filler_len = base.kv_blocks * bs;
    std::vector<int32_t> filler = session->encode_text(apache + apache);
    if (static_cast<int>(filler.size()) < filler_len) return fail("the filler text is too short");
    filler.resize(static_cast<size_t>(filler_len));
    base.max_model_len = filler_len + 16;
    base.scheduler.max_num_batched_tokens = o.runner.n_batch;
    base.scheduler.max_num_seqs = 4;
    base.snapshot_every = 0;
    const double cpu_mib = o.tiers.cpu_mib > 0 ? o.tiers.cpu_mib : 128;
    const double disk_mib = o.tiers.disk_mib > 0 ? o.tiers.disk_mib : 256;
    const bool own_root = o.tiers.disk_dir.empty();
    std::string root = o.tiers.disk_dir;
    if (own_root) {
        std::error_code ec;
        fs::create_directories(default_kv_disk_root(), ec);
        std::string tmpl = default_kv_disk_root() + "/bench-XXXXXX";
        if (!::mkdtemp(tmpl.data())) return fail("cannot make a folder under " + default_kv_disk_root());
        root = tmpl;
    }
    auto with_tiers = [&](double cpu, double disk, const std::string& dir) {
        EngineOptions e = base;
        KvTierFlags t{cpu, disk, dir};
        t.apply(e);
        return e;
    };

    const std::vector<std::string> variants = {"cold", "cpu", "disk", "disk-cold"};
    std::map<std::string, std::vector<TimedRun>> runs;
    std::string err;
    std::fprintf(stderr, "kv tiers bench: prompt %d tokens (system %d), pool %d blocks of %d, filler %d tokens, "
                 "CPU tier %.0f MiB, disk %.0f MiB under %s\n",
                 n_prompt, o.tier_prompt, base.kv_blocks, bs, filler_len, cpu_mib, disk_mib, root.c_str());
    for (int rep = 0; rep < o.repetitions && err.empty(); ++rep) {
        for (size_t vi = 0; vi < variants.size() && err.empty(); ++vi) {
            const std::string& v = variants[(vi + static_cast<size_t>(rep)) % variants.size()];
            const std::vector<int32_t> prompt = prompt_for(rep);
            Result<TimedRun> r = Result<TimedRun>::error("not run");
            if (v == "cold") {
                auto e = session->make_engine(base, false);
                if (!e) {
                    err = e.message();
                    break;
                }
                r = time_first_token(**e, prompt);
            } else if (v == "cpu") {
                auto e = session->make_engine(with_tiers(cpu_mib, 0, root), false);
                if (!e) {
                    err = e.message();
                    break;
                }
                auto w = time_first_token(**e, warm_prompt);
                auto f = w ? time_first_token(**e, filler) : w;
                r = f ? time_first_token(**e, prompt) : f;
            } else {
                const std::string dir = root + "/rep" + std::to_string(rep) + "-" + v;
                {
                    auto e = session->make_engine(with_tiers(0, disk_mib, dir), false);
                    if (!e) {
                        err = e.message();
                        break;
                    }
                    auto w = time_first_token(**e, warm_prompt);
                    auto f = w ? time_first_token(**e, filler) : w;
                    if (!f) {
                        err = f.message();
                        break;
                    }
                    if (v == "disk-cold") drop_page_cache((*e)->kv_tiers()->disk()->folder());
                }  // the "restart"
                auto e = session->make_engine(with_tiers(cpu_mib, disk_mib, dir), false);
                if (!e) {
                    err = e.message();
                    break;
                }
                r = time_first_token(**e, prompt);
            }
            if (!r) {
                err = r.message();
                break;
            }
            runs[v].push_back(*r);
            std::fprintf(stderr, "  rep %d %-9s TTFT %8.1f ms (from CPU tier %lld tokens, from disk %lld)\n", rep + 1,
                         v.c_str(), r->ttft_ms, static_cast<long long>(r->cpu_hit_tokens),
                         static_cast<long long>(r->disk_hit_tokens));
        }
    }
    if (own_root) {
        std::error_code ec;
        fs::remove_all(root, ec);
    }
    if (!err.empty()) return fail(err);

    nlohmann::json rows = nlohmann::json::array();
    std::printf("| variant | runs | TTFT median ms | min | max | tokens loaded (CPU / disk) |\n");
    std::printf("| --- | --- | --- | --- | --- | --- |\n");
    for (const std::string& v : variants) {
        std::vector<double> t;
        nlohmann::json each = nlohmann::json::array();
        for (const TimedRun& r : runs[v]) {
            t.push_back(r.ttft_ms);
            each.push_back({{"ttft_ms", r.ttft_ms}, {"cpu_hit_tokens", r.cpu_hit_tokens},
                            {"disk_hit_tokens", r.disk_hit_tokens}});
        }
        const TimedRun& last = runs[v].back();
        std::printf("| %s | %zu | %.1f | %.1f | %.1f | %lld / %lld |\n", v.c_str(), t.size(), median(t),
                    *std::min_element(t.begin(), t.end()), *std::max_element(t.begin(), t.end()),
                    static_cast<long long>(last.cpu_hit_tokens), static_cast<long long>(last.disk_hit_tokens));
        rows.push_back({{"variant", v}, {"median_ms", median(t)}, {"runs", each}});
    }
    if (!o.json_out.empty()) {
        nlohmann::json j = {{"bench", "kv-tiers"},
                            {"model", session->model().path},
                            {"prompt_tokens", n_prompt},
                            {"system_tokens", o.tier_prompt},
                            {"block_size", bs},
                            {"pool_blocks", base.kv_blocks},
                            {"cpu_tier_mib", cpu_mib},
                            {"disk_mib", disk_mib},
                            {"variants", rows}};
        std::ofstream(o.json_out) << j.dump(2) << "\n";
    }
    return 0;
}

}  // namespace kvs::app
