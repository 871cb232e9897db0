// The telemetry stream's event as JSON (format in telemetry_event.h).
#include "engine/telemetry/telemetry_event.h"

#include <climits>
#include <cmath>

#include "engine/telemetry/trace_json.h"

namespace kvs {

using nlohmann::json;

namespace {

constexpr std::pair<TokenFate, const char*> kFates[] = {
    {TokenFate::plain, "plain"},         {TokenFate::accepted, "accepted"}, {TokenFate::corrected, "corrected"},
    {TokenFate::bonus, "bonus"},         {TokenFate::rejected, "rejected"}, {TokenFate::discarded, "discarded"},
};

TokenFate fate_from(const json& j) {
    const std::string s = j.get<std::string>();
    for (const auto& [f, name] : kFates)
        if (s == name) return f;
    throw json::other_error::create(501, "unknown token fate \"" + s + "\"", &j);
}

template <typename T>
void get_if(const json& j, const char* key, T& into) {
    if (auto it = j.find(key); it != j.end()) it->get_to(into);
}

json stats_to_json(const SpecStats& s) {
    return json{{"verify_steps", s.verify_steps},
                {"drafted", s.drafted},
                {"evaluated", s.evaluated},
                {"accepted", s.accepted},
                {"discarded", s.discarded},
                {"bonus", s.bonus},
                {"emitted", s.emitted},
                {"sum_k", s.sum_k},
                {"pos_evaluated", s.pos_evaluated},
                {"pos_accepted", s.pos_accepted},
                {"accepted_len_hist", s.accepted_len_hist},
                {"draft_ms", s.draft_ms},
                {"verify_ms", s.verify_ms}};
}

SpecStats stats_from_json(const json& j) {
    SpecStats s;
    get_if(j, "verify_steps", s.verify_steps);
    get_if(j, "drafted", s.drafted);
    get_if(j, "evaluated", s.evaluated);
    get_if(j, "accepted", s.accepted);
    get_if(j, "discarded", s.discarded);
    get_if(j, "bonus", s.bonus);
    get_if(j, "emitted", s.emitted);
    get_if(j, "sum_k", s.sum_k);
    get_if(j, "pos_evaluated", s.pos_evaluated);
    get_if(j, "pos_accepted", s.pos_accepted);
    get_if(j, "accepted_len_hist", s.accepted_len_hist);
    get_if(j, "draft_ms", s.draft_ms);
    get_if(j, "verify_ms", s.verify_ms);
    return s;
}

json rate_to_json(const DecodeRate& r) {
    return json{{"id", r.id}, {"n_tokens", r.n_tokens}, {"tok_per_s", r.tok_per_s}, {"solo", r.solo}};
}

DecodeRate rate_from_json(const json& j) {
    DecodeRate r;
    get_if(j, "id", r.id);
    get_if(j, "n_tokens", r.n_tokens);
    get_if(j, "tok_per_s", r.tok_per_s);
    get_if(j, "solo", r.solo);
    return r;
}

// One snapshot; `whole` false leaves out the block map and the requests' token ids.
json snapshot_to_json(const EngineSnapshot& s, bool whole) {
    json j = s;  // trace_json.h's schema
    if (!whole) {
        j.erase("blocks");
        j.erase("host_blocks");
        j.erase("local_blocks");
    }
    json& reqs = j["requests"];
    for (size_t i = 0; i < s.requests.size() && i < reqs.size(); ++i) {
        const RequestView& r = s.requests[i];
        if (!r.adapter.empty()) reqs[i]["adapter"] = r.adapter;
        if (!r.client.empty()) reqs[i]["client"] = r.client;
        if (r.n_green >= 0) reqs[i]["n_green"] = r.n_green;
        if (whole && !r.tokens.empty()) reqs[i]["tokens"] = r.tokens;
    }
    return j;
}

EngineSnapshot snapshot_from_json(const json& j) {
    EngineSnapshot s = j.get<EngineSnapshot>();
    if (auto it = j.find("requests"); it != j.end() && it->is_array())
        for (size_t i = 0; i < it->size() && i < s.requests.size(); ++i) {
            const json& r = (*it)[i];
            get_if(r, "adapter", s.requests[i].adapter);
            get_if(r, "client", s.requests[i].client);
            get_if(r, "n_green", s.requests[i].n_green);
            get_if(r, "tokens", s.requests[i].tokens);
        }
    return s;
}

void put_utf8(std::string& out, uint32_t cp) {
    if (cp < 0x80) {
        out += static_cast<char>(cp);
    } else {
        out += static_cast<char>(0xC0 | (cp >> 6));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    }
}

// What a view could not draw: the error names the field. The snapshot came from another
// machine, so nothing in it is trusted.
std::string check_snapshot(const EngineSnapshot& s) {
    auto finite = [](double v) { return std::isfinite(v); };
    const StepRecord& r = s.step;
    if (s.block_size < 1 || s.block_size > (1 << 16))
        return "block_size " + std::to_string(s.block_size) + " is not between 1 and 65536";
    if (s.blocks.size() > (size_t{1} << 20)) return "more than 1048576 blocks";
    if (s.local_blocks.size() > (size_t{1} << 20)) return "more than 1048576 local-layer blocks";
    for (const auto* pool : {&s.blocks, &s.local_blocks})
        for (const BlockView& b : *pool)
            if (b.n_filled < 0 || b.n_filled > s.block_size || b.owners.size() > 65536)
                return "block " + std::to_string(b.block_id) + " has " + std::to_string(b.n_filled) +
                       " tokens filled of " + std::to_string(s.block_size);
    for (double v : {r.t_start_ms, r.duration_ms, r.schedule_ms, r.forward_ms, r.sample_ms, r.draft_ms, r.kv_usage,
                     r.internal_waste, s.prefix_hit_rate})
        if (!finite(v)) return "step " + std::to_string(r.step) + " has a number that is not finite";
    if (s.requests.size() > 65536) return "more than 65536 requests";
    return {};
}

}  // namespace

std::string bytes_to_latin1_utf8(const std::string& bytes) {
    std::string out;
    out.reserve(bytes.size());
    for (unsigned char b : bytes) put_utf8(out, b);
    return out;
}

bool latin1_utf8_to_bytes(const std::string& text, std::string* bytes) {
    bytes->clear();
    for (size_t i = 0; i < text.size(); ++i) {
        const auto c = static_cast<unsigned char>(text[i]);
        if (c < 0x80) {
            *bytes += static_cast<char>(c);
        } else if ((c & 0xE0) == 0xC0 && c <= 0xC3 && i + 1 < text.size() &&
                   (static_cast<unsigned char>(text[i + 1]) & 0xC0) == 0x80) {
            *bytes += static_cast<char>(((c & 0x03) << 6) | (static_cast<unsigned char>(text[i + 1]) & 0x3F));
            ++i;
        } else {
            return false;  // a code point above U+00FF (or not UTF-8)
        }
    }
    return true;
}

json spec_snapshot_to_json(const SpecSnapshot& s) {
    json reqs = json::array();
    for (const auto& rp : s.requests) {
        if (!rp) continue;
        const SpecRequestView& r = *rp;
        json fates = json::array();
        for (const SpecTokenEvent& e : r.fates) fates.push_back(json::array({e.token, token_fate_name(e.fate), e.draft_pos, e.step}));
        reqs.push_back(json{{"id", r.id},
                            {"proposer", r.proposer},
                            {"k", r.k},
                            {"adaptive", r.adaptive},
                            {"finished", r.finished},
                            {"stats", stats_to_json(r.stats)},
                            {"fates", std::move(fates)},
                            {"rate", rate_to_json(r.rate)}});
    }
    return json{{"step", s.step},
                {"requests", std::move(reqs)},
                {"totals", stats_to_json(s.totals)},
                {"drafts", s.drafts},
                {"plain_baseline", rate_to_json(s.plain_baseline)}};
}

SpecSnapshot spec_snapshot_from_json(const json& j) {
    SpecSnapshot s;
    get_if(j, "step", s.step);
    if (auto it = j.find("requests"); it != j.end()) {
        for (const json& rj : it->get_ref<const json::array_t&>()) {
            auto r = std::make_shared<SpecRequestView>();
            get_if(rj, "id", r->id);
            get_if(rj, "proposer", r->proposer);
            get_if(rj, "k", r->k);
            get_if(rj, "adaptive", r->adaptive);
            get_if(rj, "finished", r->finished);
            if (auto st = rj.find("stats"); st != rj.end()) r->stats = stats_from_json(*st);
            if (auto rt = rj.find("rate"); rt != rj.end()) r->rate = rate_from_json(*rt);
            if (auto f = rj.find("fates"); f != rj.end()) {
                for (const json& e : f->get_ref<const json::array_t&>()) {
                    if (!e.is_array() || e.size() != 4)
                        throw json::other_error::create(501, "a token fate is not [token, fate, draft_pos, step]", &e);
                    r->fates.push_back({e[0].get<int32_t>(), fate_from(e[1]), e[2].get<int>(), e[3].get<int64_t>()});
                }
            }
            s.requests.push_back(std::move(r));
        }
    }
    if (auto it = j.find("totals"); it != j.end()) s.totals = stats_from_json(*it);
    get_if(j, "drafts", s.drafts);
    if (auto it = j.find("plain_baseline"); it != j.end()) s.plain_baseline = rate_from_json(*it);
    return s;
}

json telemetry_event_to_json(const TelemetryEvent& e) {
    json j = json::object();
    j["format"] = kTelemetryFormat;
    j["version"] = kTelemetryVersion;
    const TelemetryServerInfo& si = e.server;
    j["server"] = json{{"model", si.model},
                       {"weight_bytes", si.weight_bytes},
                       {"kv_bytes_per_block", si.kv_bytes_per_block},
                       {"block_size", si.block_size},
                       {"n_blocks", si.n_blocks},
                       {"max_model_len", si.max_model_len},
                       {"kv_type", si.kv_type}};
    json snaps = json::array();
    for (size_t i = 0; i < e.snapshots.size(); ++i)
        if (e.snapshots[i]) snaps.push_back(snapshot_to_json(*e.snapshots[i], i + 1 == e.snapshots.size()));
    j["snapshots"] = std::move(snaps);
    if (e.spec) j["spec"] = spec_snapshot_to_json(*e.spec);
    j["latency"] = e.latency;
    json pieces = json::object();
    for (const auto& [id, p] : e.pieces)
        pieces[std::to_string(id)] = json::array({bytes_to_latin1_utf8(p.bytes), p.control});
    j["pieces"] = std::move(pieces);
    return j;
}

Result<TelemetryEvent> parse_telemetry_event(const std::string& text) {
    json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) return Status::error("a telemetry event is not valid JSON");
    if (!j.is_object() || !j.contains("format") || j["format"] != kTelemetryFormat)
        return Status::error(std::string("a telemetry event without \"format\": \"") + kTelemetryFormat + "\"");
    if (!j.contains("version") || !j["version"].is_number_integer() || j["version"].get<int>() != kTelemetryVersion)
        return Status::error("telemetry version " + (j.contains("version") ? j["version"].dump() : std::string("(none)")) +
                             " is not supported (this program reads version " + std::to_string(kTelemetryVersion) +
                             ")");
    TelemetryEvent e;
    const char* where = "server";
    try {
        if (auto it = j.find("server"); it != j.end()) {
            const json& s = *it;
            get_if(s, "model", e.server.model);
            get_if(s, "weight_bytes", e.server.weight_bytes);
            get_if(s, "kv_bytes_per_block", e.server.kv_bytes_per_block);
            get_if(s, "block_size", e.server.block_size);
            get_if(s, "n_blocks", e.server.n_blocks);
            get_if(s, "max_model_len", e.server.max_model_len);
            get_if(s, "kv_type", e.server.kv_type);
        }
        where = "snapshots";
        auto sn = j.find("snapshots");
        if (sn == j.end() || !sn->is_array() || sn->empty())
            return Status::error("a telemetry event without \"snapshots\"");
        for (const json& s : *sn) {
            auto snap = std::make_shared<const EngineSnapshot>(snapshot_from_json(s));
            if (const std::string bad = check_snapshot(*snap); !bad.empty())
                return Status::error("a telemetry event's snapshot is not drawable: " + bad);
            e.snapshots.push_back(std::move(snap));
        }
        where = "spec";
        if (auto it = j.find("spec"); it != j.end() && !it->is_null())
            e.spec = std::make_shared<const SpecSnapshot>(spec_snapshot_from_json(*it));
        where = "latency";
        if (auto it = j.find("latency"); it != j.end()) it->get_to(e.latency);
        where = "pieces";
        if (auto it = j.find("pieces"); it != j.end()) {
            for (auto p = it->begin(); p != it->end(); ++p) {
                const json& v = p.value();
                if (!v.is_array() || v.size() != 2 || !v[0].is_string() || !v[1].is_boolean())
                    return Status::error("a telemetry event's piece \"" + p.key() + "\" is not [text, control]");
                TokenPiece piece;
                if (!latin1_utf8_to_bytes(v[0].get<std::string>(), &piece.bytes))
                    return Status::error("a telemetry event's piece \"" + p.key() + "\" is not one byte per character");
                piece.control = v[1].get<bool>();
                size_t used = 0;
                const long id = std::stol(p.key(), &used);
                if (used != p.key().size() || id < 0 || id > INT32_MAX)
                    return Status::error("a telemetry event's piece key \"" + p.key() + "\" is not a token id");
                e.pieces[static_cast<int32_t>(id)] = std::move(piece);
            }
        }
    } catch (const std::exception& ex) {
        return Status::error(std::string("a telemetry event's \"") + where + "\" is malformed: " + ex.what());
    }
    return e;
}

}  // namespace kvs
