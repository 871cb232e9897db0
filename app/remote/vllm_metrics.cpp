#include "app/remote/vllm_metrics.h"

#include <algorithm>
#include <set>

namespace kvs::remote {

namespace {

bool for_model(const PromSample& s, std::string_view model) {
    if (model.empty()) return true;
    const std::string* m = s.label("model_name");
    return !m || *m == model;  // a sample without the label belongs to every model (llama-server's)
}

// The sum over engines of every sample named `name` (or `name` + "_total" for counters
// written by prometheus_client); NaN when there is none.
double total(const PromPage& page, std::string_view name, std::string_view model) {
    double sum = 0;
    bool seen = false;
    const std::string with_total = std::string(name) + "_total";
    for (const PromSample& s : page.samples) {
        if ((s.name != name && s.name != with_total) || !for_model(s, model)) continue;
        sum += s.value;
        seen = true;
    }
    return seen ? sum : kUnknown;
}

double first_of(const PromPage& page, std::initializer_list<std::string_view> names, std::string_view model) {
    for (std::string_view n : names)
        if (double v = total(page, n, model); !std::isnan(v)) return v;
    return kUnknown;
}

}  // namespace

double histogram_quantile(double q, const PromHistogram& h) {
    if (std::isnan(q)) return kUnknown;
    if (q < 0) return -std::numeric_limits<double>::infinity();
    if (q > 1) return std::numeric_limits<double>::infinity();
    std::vector<std::pair<double, double>> b = h.buckets;
    for (const auto& x : b)
        if (std::isnan(x.first) || std::isnan(x.second)) return kUnknown;
    std::sort(b.begin(), b.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
    if (b.empty() || !(std::isinf(b.back().first) && b.back().first > 0)) return kUnknown;
    // Coalesce buckets with the same upper bound (several engines already summed: this is
    // a page that repeats a bound), then make the cumulative counts monotonic.
    std::vector<std::pair<double, double>> c;
    for (const auto& x : b) {
        if (!c.empty() && c.back().first == x.first) c.back().second += x.second;
        else
            c.push_back(x);
    }
    double mx = -std::numeric_limits<double>::infinity();
    for (auto& x : c) {
        mx = std::max(mx, x.second);
        x.second = mx;
    }
    if (c.size() < 2) return kUnknown;
    const double observations = c.back().second;
    if (!(observations > 0)) return kUnknown;
    double rank = q * observations;
    size_t i = 0;
    while (i < c.size() - 1 && c[i].second < rank) ++i;
    if (i == c.size() - 1) return c[c.size() - 2].first;
    if (i == 0 && c[0].first <= 0) return c[0].first;
    double start = 0, end = c[i].first, count = c[i].second;
    if (i > 0) {
        start = c[i - 1].first;
        count -= c[i - 1].second;
        rank -= c[i - 1].second;
    }
    if (!(count > 0)) return end;
    return start + (end - start) * (rank / count);
}

PromHistogram histogram_of(const PromPage& page, std::string_view name, std::string_view model) {
    PromHistogram h;
    const std::string bucket = std::string(name) + "_bucket", sum = std::string(name) + "_sum",
                      count = std::string(name) + "_count";
    std::map<double, double> by_le;
    double s_sum = 0, s_count = 0;
    bool has_sum = false, has_count = false;
    for (const PromSample& s : page.samples) {
        if (!for_model(s, model)) continue;
        if (s.name == bucket) {
            const std::string* le = s.label("le");
            if (!le) continue;
            const auto bound = parse_prom_float(*le);
            if (!bound || std::isnan(*bound)) continue;
            by_le[*bound] += s.value;
        } else if (s.name == sum) {
            s_sum += s.value;
            has_sum = true;
        } else if (s.name == count) {
            s_count += s.value;
            has_count = true;
        }
    }
    h.buckets.assign(by_le.begin(), by_le.end());
    if (has_sum) h.sum = s_sum;
    if (has_count) h.count = s_count;
    return h;
}

std::vector<double> VllmMetrics::spec_acceptance_per_pos() const {
    std::vector<double> r;
    for (double a : spec_accepted_per_pos) r.push_back(ratio(a, spec_drafts));
    return r;
}

Result<VllmMetrics> read_vllm_metrics(const PromPage& page, std::string_view model_name) {
    VllmMetrics m;
    std::set<std::string> models, engines;
    bool vllm = false, llamacpp = false;
    for (const PromSample& s : page.samples) {
        if (s.name.rfind("vllm:", 0) == 0) vllm = true;
        if (s.name.rfind("llamacpp:", 0) == 0) llamacpp = true;
        if (const std::string* mn = s.label("model_name")) models.insert(*mn);
    }
    m.models_on_page.assign(models.begin(), models.end());
    if (!vllm && !llamacpp) {
        std::string names;
        std::set<std::string> seen;
        for (const PromSample& s : page.samples) {
            if (seen.size() >= 3) break;
            if (seen.insert(s.name).second) names += (names.empty() ? "" : ", ") + s.name.substr(0, 60);
        }
        return Status::error("the /metrics page has no vLLM (vllm:*) or llama-server (llamacpp:*) metrics; it has " +
                             (names.empty() ? std::string("no samples") : names));
    }
    if (!model_name.empty() && !models.empty() && !models.count(std::string(model_name))) {
        std::string list;
        for (const std::string& x : models) list += (list.empty() ? "" : ", ") + x;
        return Status::error("the /metrics page has no model_name \"" + std::string(model_name) + "\" (it has " + list +
                             ")");
    }
    const std::string model = !model_name.empty() ? std::string(model_name) : (models.empty() ? "" : *models.begin());
    m.model_name = model;

    if (vllm) {
        m.dialect = MetricsDialect::Vllm;
        for (const PromSample& s : page.samples)
            if (s.name.rfind("vllm:", 0) == 0 && for_model(s, model))
                if (const std::string* e = s.label("engine")) engines.insert(*e);
        m.n_engines = std::max<int>(1, int(engines.size()));
        m.num_running = total(page, "vllm:num_requests_running", model);
        m.num_waiting = total(page, "vllm:num_requests_waiting", model);
        // Usage is a fraction per engine: the mean over engines, weighted equally.
        const double usage = first_of(page, {"vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"}, model);
        m.kv_usage = std::isnan(usage) ? usage : usage / m.n_engines;
        double gpu_blocks = 0, cpu_blocks = 0;
        bool has_cfg = false;
        for (const PromSample* s : page.find("vllm:cache_config_info")) {
            if (!for_model(*s, model) && s->label("model_name")) continue;
            has_cfg = true;
            auto num = [&](const char* key) {
                const std::string* v = s->label(key);
                return v ? parse_prom_float(*v).value_or(kUnknown) : kUnknown;
            };
            gpu_blocks += num("num_gpu_blocks");
            cpu_blocks += num("num_cpu_blocks");
            m.block_size = num("block_size");
            if (const std::string* d = s->label("cache_dtype")) m.cache_dtype = *d;
        }
        if (has_cfg) {
            m.num_gpu_blocks = gpu_blocks;
            m.num_cpu_blocks = cpu_blocks;
        }
        m.prefix_queries = first_of(page, {"vllm:prefix_cache_queries", "vllm:gpu_prefix_cache_queries"}, model);
        m.prefix_hits = first_of(page, {"vllm:prefix_cache_hits", "vllm:gpu_prefix_cache_hits"}, model);
        m.preemptions = total(page, "vllm:num_preemptions", model);
        m.prompt_tokens = total(page, "vllm:prompt_tokens", model);
        m.generation_tokens = total(page, "vllm:generation_tokens", model);
        for (const PromSample& s : page.samples) {
            if ((s.name != "vllm:request_success_total" && s.name != "vllm:request_success") || !for_model(s, model))
                continue;
            const std::string* r = s.label("finished_reason");
            m.request_success[r ? *r : ""] += s.value;
        }
        m.spec_drafts = total(page, "vllm:spec_decode_num_drafts", model);
        m.spec_draft_tokens = total(page, "vllm:spec_decode_num_draft_tokens", model);
        m.spec_accepted = total(page, "vllm:spec_decode_num_accepted_tokens", model);
        for (const PromSample& s : page.samples) {
            if (s.name != "vllm:spec_decode_num_accepted_tokens_per_pos_total" &&
                s.name != "vllm:spec_decode_num_accepted_tokens_per_pos")
                continue;
            if (!for_model(s, model)) continue;
            const std::string* p = s.label("position");
            const auto pos = p ? parse_prom_float(*p) : std::nullopt;
            if (!pos || !(*pos >= 0) || *pos > 64 || *pos != std::floor(*pos)) continue;  // at most 65 positions
            const size_t i = size_t(*pos);
            if (m.spec_accepted_per_pos.size() <= i) m.spec_accepted_per_pos.resize(i + 1, 0.0);
            m.spec_accepted_per_pos[i] += s.value;
        }
        m.ttft = histogram_of(page, "vllm:time_to_first_token_seconds", model);
        m.tpot = histogram_of(page, "vllm:time_per_output_token_seconds", model);
        m.itl = histogram_of(page, "vllm:inter_token_latency_seconds", model);
        if (!m.tpot.present()) m.tpot = histogram_of(page, "vllm:request_time_per_output_token_seconds", model);
        m.e2e = histogram_of(page, "vllm:e2e_request_latency_seconds", model);
        m.queue = histogram_of(page, "vllm:request_queue_time_seconds", model);
        m.iteration_tokens = histogram_of(page, "vllm:iteration_tokens_total", model);
    } else {
        // llama-server: no model_name label, one engine; slots instead of blocks.
        m.dialect = MetricsDialect::LlamaCpp;
        m.n_engines = 1;
        m.num_running = total(page, "llamacpp:requests_processing", model);
        m.num_waiting = total(page, "llamacpp:requests_deferred", model);
        m.kv_usage = total(page, "llamacpp:kv_cache_usage_ratio", model);
        m.prompt_tokens = total(page, "llamacpp:prompt_tokens", model);
        m.generation_tokens = total(page, "llamacpp:tokens_predicted", model);
        m.spec_drafts = total(page, "llamacpp:spec_decode_num_drafts", model);
        m.spec_draft_tokens = total(page, "llamacpp:spec_decode_num_draft_tokens", model);
        m.spec_accepted = total(page, "llamacpp:spec_decode_num_accepted_tokens", model);
    }
    return m;
}

}  // namespace kvs::remote
