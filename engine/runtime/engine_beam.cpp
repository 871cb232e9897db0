// Beam search on copy-on-write forks: each live beam is a request of the scheduler; a
// step collects every beam's best next tokens, then the group keeps the best `width`
// extensions (forking a beam that continues more than once) and ends hypotheses.
#include "engine/runtime/engine.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "engine/runtime/engine_request.h"

namespace kvs {

void Engine::init_beam(Req& r, int width, int max_tokens, bool ignore_eos) {
    r.beam = std::make_shared<BeamGroup>();
    r.beam->root = r.id;
    r.beam->width = width;
    r.beam->max_tokens = max_tokens;
    r.beam->ignore_eos = ignore_eos;
    r.beam->length_penalty = r.params.length_penalty;
    r.beam->min_new_tokens = r.params.min_new_tokens;
    r.beam->live = {r.id};
    r.beam->score[r.id] = 0.0;
}

std::vector<BeamHypothesis> Engine::beam_hypotheses(RequestId id) const {
    auto it = m_reqs.find(id);
    if (it == m_reqs.end() || !it->second->beam || it->second->beam->root != id || !it->second->beam->finished)
        return {};
    return it->second->beam->done;
}

// Hugging Face's beam search, one beam's part: log_softmax over the whole vocabulary (in
// double), end-of-generation tokens dropped while the beam is shorter than min_new_tokens
// (after the softmax, as its MinNewTokensLengthLogitsProcessor does), then the best
// max(2, 1 + n_eog) x width tokens (lower id first among equals): enough for `width`
// continuations even when every end-of-generation token is among them.
// Hugging Face's n_tokens_to_keep: max(2, 1 + end-of-generation ids) x width.
int Engine::beam_candidates(const BeamGroup& g) const {
    return std::max(2, 1 + static_cast<int>(m_eog_ids.size())) * g.width;
}

void Engine::beam_collect(Req& r, const float* logits) {
    const int n = m_model->config.n_vocab;
    const double mx = *std::max_element(logits, logits + n);
    double sum = 0;
    for (int i = 0; i < n; ++i) sum += std::exp(static_cast<double>(logits[i]) - mx);
    const double lse = mx + std::log(sum);
    const BeamGroup& g = *r.beam;
    const bool hold = !g.ignore_eos && m_sched->request(r.id)->num_output() < g.min_new_tokens;
    std::vector<int32_t> idx;
    idx.reserve(static_cast<size_t>(n));
    for (int32_t i = 0; i < n; ++i)
        if (!hold || !std::binary_search(m_eog_ids.begin(), m_eog_ids.end(), i)) idx.push_back(i);
    const int w = std::min<int>(beam_candidates(g), static_cast<int>(idx.size()));
    std::partial_sort(idx.begin(), idx.begin() + w, idx.end(),
                      [&](int32_t a, int32_t b) { return logits[a] != logits[b] ? logits[a] > logits[b] : a < b; });
    auto& cand = r.beam->pending[r.id];
    cand.clear();
    for (int i = 0; i < w; ++i)
        cand.emplace_back(static_cast<double>(logits[idx[static_cast<size_t>(i)]]) - lse, idx[static_cast<size_t>(i)]);
}

// After the scheduler's update: every group whose live beams all ran this step advances.
void Engine::advance_beams(const std::vector<BeamGroup*>& groups, std::vector<RequestId>* finished) {
    for (BeamGroup* g : groups)
        if (!g->finished && g->pending.size() == g->live.size()) beam_advance(*g, finished);
}

// Hugging Face's BeamSearchScorer.process for one step: candidates ranked by sum of
// log-probs (ties: the better-ranked parent, then the lower id); an end-of-generation
// candidate among the first `width` ends a hypothesis (scored by length^length_penalty,
// length with that token), others are skipped; the first `width` other candidates continue.
void Engine::beam_advance(BeamGroup& g, std::vector<RequestId>* finished) {
    struct Cand {
        double score;
        int rank;  // parent's rank among the live beams
        int32_t token;
    };
    std::vector<Cand> cands;
    for (size_t rank = 0; rank < g.live.size(); ++rank)
        for (const auto& [lp, tok] : g.pending.at(g.live[rank]))
            cands.push_back({g.score.at(g.live[rank]) + lp, static_cast<int>(rank), tok});
    g.pending.clear();
    std::stable_sort(cands.begin(), cands.end(), [](const Cand& a, const Cand& b) {
        if (a.score != b.score) return a.score > b.score;
        return a.rank != b.rank ? a.rank < b.rank : a.token < b.token;
    });
    if (cands.size() > static_cast<size_t>(beam_candidates(g))) cands.resize(static_cast<size_t>(beam_candidates(g)));
    // Generated tokens after this step (every live beam has the same count).
    const int cur_len = g.live.empty() ? 1 : m_sched->request(g.live.front())->num_output() + 1;
    std::vector<Cand> keep;
    for (size_t i = 0; i < cands.size(); ++i) {
        const Cand& c = cands[i];
        if (!g.ignore_eos && m_tok && m_tok->is_eog(c.token)) {  // a hypothesis ends here
            if (static_cast<int>(i) >= g.width) continue;
            BeamHypothesis h{m_sched->request(g.live[static_cast<size_t>(c.rank)])->output, c.score, 0.0};
            h.score = c.score / std::pow(static_cast<double>(cur_len), static_cast<double>(g.length_penalty));
            g.add_done(std::move(h));
            g.reason = FinishReason::stop;
            continue;
        }
        keep.push_back(c);
        if (static_cast<int>(keep.size()) == g.width) break;
    }
    // Each kept extension continues in its parent's request the first time the parent is
    // used, in a fork of it after that. Forks first: a child copies the parent's tokens.
    std::vector<RequestId> next(keep.size());
    std::vector<bool> parent_used(g.live.size(), false);
    for (size_t i = 0; i < keep.size(); ++i) {
        const RequestId parent = g.live[static_cast<size_t>(keep[i].rank)];
        if (!parent_used[static_cast<size_t>(keep[i].rank)]) {
            parent_used[static_cast<size_t>(keep[i].rank)] = true;
            next[i] = parent;
            continue;
        }
        const RequestId child = m_next_beam_id--;
        if (!m_sched->fork_request(parent, child)) {  // cannot happen for a running parent
            next[i] = 0;
            continue;
        }
        const Req& p = *m_reqs.at(parent);
        auto& c = *m_reqs.emplace(child, std::make_unique<Req>(child, p.params, m_tok.get(), nullptr, p.history))
                       .first->second;
        c.beam = p.beam;
        c.adapter = p.adapter;
        c.client = p.client;
        next[i] = child;
    }
    for (size_t rank = 0; rank < g.live.size(); ++rank)
        if (!parent_used[rank]) m_sched->finish_request(g.live[rank], FinishReason::stop);  // dropped beam
    std::unordered_map<RequestId, double> score;
    g.live.clear();
    for (size_t i = 0; i < keep.size(); ++i) {
        if (next[i] == 0 || !m_sched->append_token(next[i], keep[i].token)) continue;
        m_reqs.at(next[i])->history.push_back(keep[i].token);
        g.live.push_back(next[i]);
        score[next[i]] = keep[i].score;
    }
    g.score = std::move(score);

    const bool at_length = !g.live.empty() && m_sched->request(g.live.front())->num_output() >= g.max_tokens;
    // Hugging Face's is_done (early_stopping=False): `width` hypotheses have ended and the
    // worst of them beats the best candidate's sum divided by the current length^penalty.
    bool settled = false;
    if (static_cast<int>(g.done.size()) >= g.width && !cands.empty()) {
        const double best = cands.front().score / std::pow(static_cast<double>(cur_len), g.length_penalty);
        settled = g.done.back().score >= best;
    }
    if (g.live.empty() || at_length || settled) {
        if (at_length && !settled) {
            g.reason = FinishReason::length;
            for (RequestId b : g.live) {
                const auto& out = m_sched->request(b)->output;
                const double s = g.score[b] / std::pow(static_cast<double>(out.size()), g.length_penalty);
                g.add_done({out, g.score[b], s});
            }
        }
        beam_finish(g, finished);
    }
}

void Engine::beam_finish(BeamGroup& g, std::vector<RequestId>* finished) {
    for (RequestId b : g.live) m_sched->finish_request(b, g.reason);
    g.live.clear();
    g.finished = true;
    finished->push_back(g.root);
    Req& root = *m_reqs.at(g.root);
    TokenEvent ev;
    ev.finished = true;
    ev.finish_reason = g.reason;
    if (m_tok && !g.done.empty()) ev.text = m_tok->decode(g.done.front().tokens);
    ev.beams = &g.done;
    emit(root, ev);
}

}  // namespace kvs
