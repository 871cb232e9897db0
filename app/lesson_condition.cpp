#include "app/lesson_condition.h"

#include <QRegularExpression>
#include <algorithm>

#include "ui/kv_map_stats.h"

namespace kvs::app {

namespace {
const QRegularExpression& placeholder_re() {
    static const QRegularExpression re(QStringLiteral("\\{([a-z_]+)\\}"));
    return re;
}

void add_request_facts(const ui::EngineFrame& f, LessonFacts& x) {
    qint64 admitted = 0, finished = 0, prefilled = 0, prefilling = 0, decoding = 0, padding = 0, preemptedNow = 0,
           resumed = 0, recomputed = 0, grown = 0;
    const int bs = std::max(1, f.blockSize);
    for (const ui::RequestRow& r : f.requests) {
        const bool done = r.status == QLatin1String("finished");
        if (done || r.cachedTokens >= 0 || r.computedTokens > 0 || r.outputTokens > 0) ++admitted;
        if (done) ++finished;
        if (r.outputTokens > 0 || (r.promptTokens > 0 && r.computedTokens >= r.promptTokens)) ++prefilled;
        switch (r.slot) {
            case ui::SlotState::Prefill: ++prefilling; break;
            case ui::SlotState::Decode: ++decoding; break;
            case ui::SlotState::Padding: ++padding; break;
            case ui::SlotState::Preempted: ++preemptedNow; break;
            default: break;
        }
        const bool runs = r.slot == ui::SlotState::Prefill || r.slot == ui::SlotState::Decode;
        if (r.preemptions > 0 && runs) ++resumed;
        if (r.preemptions > 0 && (runs || done)) ++recomputed;
        if (r.blockIds.size() > (r.promptTokens + bs - 1) / bs) ++grown;
    }
    x["requests"] = f.requests.size();
    x["admitted"] = admitted;
    x["finished"] = finished;
    x["prefilled"] = prefilled;
    x["prefilling"] = prefilling;
    x["decoding"] = decoding;
    x["padding"] = padding;
    x["preempted_now"] = preemptedNow;
    x["resumed"] = resumed;
    x["recomputed"] = recomputed;
    x["grown"] = grown;
}

void add_block_facts(const ui::EngineFrame& f, LessonFacts& x) {
    const ui::KvMapStats s = ui::KvMapStats::compute(f);
    qint64 hashed = 0, maxRef = 0;
    for (const ui::BlockCell& b : f.blocks) {
        if (b.state != ui::BlockState::Used) continue;
        if (b.hashed) ++hashed;
        maxRef = std::max<qint64>(maxRef, b.refCount);
    }
    x["blocks"] = s.nBlocks;
    x["block_size"] = f.blockSize;
    x["max_model_len"] = f.maxModelLen;
    x["used_blocks"] = s.used;
    x["shared_blocks"] = s.shared;
    x["cached_blocks"] = s.cached;
    x["free_blocks"] = s.free;
    x["hashed_blocks"] = hashed;
    x["max_ref"] = maxRef;
    x["holders"] = s.holders.size();
    x["contiguous_fit"] = s.contiguousFit;
}

// LoRA adapters: requests grouped by the adapter they run with, the base model one group.
void add_adapter_facts(const ui::EngineFrame& f, LessonFacts& x) {
    QHash<qint64, QString> adapterOf;
    QStringList inStep;
    qint64 withAdapter = 0;
    for (const ui::RequestRow& r : f.requests) {
        adapterOf.insert(r.id, r.adapter);
        if (!r.adapter.isEmpty()) ++withAdapter;
        if (r.scheduledTokens > 0 && !inStep.contains(r.adapter)) inStep << r.adapter;
    }
    qint64 cross = 0;
    for (const ui::BlockCell& b : f.blocks) {
        if (b.state != ui::BlockState::Used || b.owners.size() < 2) continue;
        const QString first = adapterOf.value(b.owners.first());
        for (qint64 o : b.owners)
            if (adapterOf.value(o) != first) {
                ++cross;
                break;
            }
    }
    x["adapters_in_step"] = inStep.size();
    x["adapter_requests"] = withAdapter;
    x["cross_adapter_blocks"] = cross;
}

void add_spec_facts(const ui::SpecFrame& s, LessonFacts& x) {
    qint64 verified = 0, accepted = 0, rejected = 0, bonus = 0, finished = 0, verifying = 0;
    for (const ui::SpecRequestFrame& r : s.requests) {
        verified += r.verifySteps;
        accepted += r.accepted;
        rejected += r.evaluated - r.accepted;
        bonus += r.bonus;
        if (r.finished) ++finished;
        if (r.verifySteps > 0) ++verifying;
    }
    x["spec_requests"] = s.requests.size();
    x["spec_verified"] = verified;
    x["spec_accepted"] = accepted;
    x["spec_rejected"] = rejected;
    x["spec_bonus"] = bonus;
    x["spec_finished"] = finished;
    x["spec_verifying"] = verifying;
}

bool compare(qint64 a, LessonCondition::Op op, qint64 b) {
    switch (op) {
        case LessonCondition::Op::Ge: return a >= b;
        case LessonCondition::Op::Gt: return a > b;
        case LessonCondition::Op::Le: return a <= b;
        case LessonCondition::Op::Lt: return a < b;
        case LessonCondition::Op::Eq: return a == b;
        case LessonCondition::Op::Ne: return a != b;
    }
    return false;
}
}  // namespace

// The roofline view's steps: decode classes shown, the largest decode batch, the prefill
// step's tokens; whether decode's FFN (gate/up) intensity rises with the batch across every
// decode step shown, and by how much (largest batch over smallest, rounded).
void add_roofline_facts(const ui::EngineFrame& f, LessonFacts& x) {
    qint64 classes = 0, maxBatch = 0, prefillTokens = 0, rises = 0, growth = 0;
    double firstAi = 0, lastAi = 0;
    int lastBatch = 0;
    bool ordered = true;
    for (const ui::RooflineStep& s : f.roofline.steps) {
        if (s.prefill) {
            prefillTokens = s.tokens;
            continue;
        }
        const ui::RooflineOp* up = s.op(QStringLiteral("ffn_gate_up"));
        if (!up) continue;
        ++classes;
        maxBatch = std::max<qint64>(maxBatch, s.decodeTokens);
        if (classes == 1) firstAi = up->intensity();
        else
            ordered = ordered && s.decodeTokens > lastBatch && up->intensity() > lastAi;
        lastAi = up->intensity();
        lastBatch = s.decodeTokens;
    }
    if (classes >= 2 && ordered) rises = 1;
    if (classes >= 2 && firstAi > 0) growth = qRound64(lastAi / firstAi);
    x["roof_decode_classes"] = classes;
    x["roof_max_decode_batch"] = maxBatch;
    x["roof_prefill_tokens"] = prefillTokens;
    x["ffn_ai_rises"] = rises;
    x["ffn_ai_growth"] = growth;
}

LessonFacts lesson_facts(const ui::EngineFrame& frame, const ui::SpecFrame& spec) {
    LessonFacts x;
    x["step"] = frame.step.step;
    x["running"] = frame.step.running;
    x["waiting"] = frame.step.waiting + frame.step.swapped;
    x["preempted"] = frame.totalPreemptions;
    add_request_facts(frame, x);
    add_block_facts(frame, x);
    add_roofline_facts(frame, x);
    add_adapter_facts(frame, x);
    add_spec_facts(spec, x);
    return x;
}

QStringList lesson_fact_names() {
    QStringList names = lesson_facts({}, {}).keys();
    names.sort();
    return names;
}

bool parse_lesson_condition(const QString& text, LessonCondition* out, QString* error) {
    static const QRegularExpression re(QStringLiteral("^\\s*([a-z_]+)\\s*(>=|<=|==|!=|>|<)\\s*([a-z_]+|-?\\d+)\\s*$"));
    const auto m = re.match(text);
    if (!m.hasMatch()) {
        *error = QString("\"%1\" is not \"fact op number\" (op one of >= > <= < == !=)").arg(text);
        return false;
    }
    const QStringList names = lesson_fact_names();
    LessonCondition c;
    c.text = text.simplified();
    c.left = m.captured(1);
    const QString op = m.captured(2);
    c.op = op == ">="   ? LessonCondition::Op::Ge
           : op == ">"  ? LessonCondition::Op::Gt
           : op == "<=" ? LessonCondition::Op::Le
           : op == "<"  ? LessonCondition::Op::Lt
           : op == "==" ? LessonCondition::Op::Eq
                        : LessonCondition::Op::Ne;
    const QString right = m.captured(3);
    bool isNumber = false;
    c.rightValue = right.toLongLong(&isNumber);
    if (!isNumber) c.rightName = right;
    for (const QString& n : {c.left, c.rightName}) {
        if (n.isEmpty() || names.contains(n)) continue;
        *error = QString("\"%1\": unknown fact \"%2\" (known: %3)").arg(text, n, names.join(", "));
        return false;
    }
    *out = c;
    return true;
}

bool condition_holds(const LessonCondition& c, const LessonFacts& facts) {
    const qint64 right = c.rightName.isEmpty() ? c.rightValue : facts.value(c.rightName);
    return compare(facts.value(c.left), c.op, right);
}

QString unknown_placeholder(const QString& text) {
    const QStringList names = lesson_fact_names();
    auto it = placeholder_re().globalMatch(text);
    while (it.hasNext()) {
        const QString n = it.next().captured(1);
        if (!names.contains(n)) return n;
    }
    return {};
}

QString render_caption(const QString& text, const LessonFacts& facts) {
    QString out;
    qsizetype at = 0;
    auto it = placeholder_re().globalMatch(text);
    while (it.hasNext()) {
        const auto m = it.next();
        out += text.mid(at, m.capturedStart() - at);
        const QString n = m.captured(1);
        out += facts.contains(n) ? QString::number(facts.value(n)) : m.captured(0);
        at = m.capturedEnd();
    }
    return out + text.mid(at);
}

}  // namespace kvs::app
