#pragma once
// What a lesson caption claims, in a form a program can check: named facts computed from
// the frames the views draw (the KV block map's / request table's EngineFrame and the Draft
// acceptance view's SpecFrame), conditions over them ("shared_blocks >= 6",
// "contiguous_fit < holders"), and caption text whose numbers come from the same facts
// ("only {contiguous_fit} of {holders} would fit"). A caption is shown only when all its
// conditions hold in the frame on screen, so it cannot run ahead of the pictures.
//
// Facts (integers):
//   step                     the engine step of the frame
//   requests                 requests the frame knows
//   admitted                 requests the scheduler has taken at least once
//   running, waiting         the step's running / waiting (+ swapped) counts
//   finished                 requests that finished
//   prefilled                requests whose whole prompt is in the KV cache
//   prefilling, decoding, padding, preempted_now
//                            requests whose slot this step is prefill / decode / a static
//                            batch's padding seat / waiting after a preemption
//   preempted                preemptions since the engine started
//   resumed                  requests that were preempted and run again this step
//   recomputed               requests that were preempted and came back (running again or
//                            finished): stays true once it holds, so a lesson running at
//                            full speed, whose frames skip steps, still reaches its caption
//   grown                    requests holding more blocks than their prompt needs
//   blocks, block_size, max_model_len
//   used_blocks, shared_blocks, cached_blocks, free_blocks, hashed_blocks, max_ref
//                            the block map's counts (ui/kv_map_stats), used blocks with a
//                            prefix hash, the highest reference count
//   holders, contiguous_fit  requests holding KV; how many of them a contiguous
//                            max-length allocation of the same memory would fit (the
//                            block map's Contiguous panel)
//   adapters_in_step         LoRA adapters among the requests run in the frame's step, the
//                            base model counting as one
//   adapter_requests         requests that run with a LoRA adapter
//   cross_adapter_blocks     used blocks held by requests of different adapters (the base
//                            model one of them): 0 unless prefix caching mixed adapters' KV
//   spec_requests, spec_verified, spec_accepted, spec_rejected, spec_bonus, spec_finished,
//   roof_decode_classes, roof_max_decode_batch, roof_prefill_tokens, ffn_ai_rises, ffn_ai_growth
//                            the Roofline view's steps: decode steps shown (one per batch
//                            class 1, 2, 4, ...), the largest decode batch, the prefill step's
//                            tokens; 1 when decode's FFN gate/up intensity rises with every
//                            larger batch shown; that intensity at the largest batch over the smallest
//   spec_verifying           speculative requests in the Draft acceptance view; verify
//                            steps, accepted / rejected drafts, bonus tokens over all of
//                            them; finished ones; those with at least one verify step
#include <QHash>
#include <QString>
#include <QStringList>

#include "ui/view_types.h"

namespace kvs::app {

using LessonFacts = QHash<QString, qint64>;

LessonFacts lesson_facts(const ui::EngineFrame& frame, const ui::SpecFrame& spec);
// Every fact name, for error messages and docs.
QStringList lesson_fact_names();

struct LessonCondition {
    enum class Op { Ge, Gt, Le, Lt, Eq, Ne };
    QString left;
    Op op = Op::Ge;
    QString rightName;  // a fact, or empty: the number
    qint64 rightValue = 0;
    QString text;  // as written
};

// "name op value" or "name op name", op one of >= > <= < == !=; false and *error naming
// what is wrong (an unknown fact, a missing operator).
bool parse_lesson_condition(const QString& text, LessonCondition* out, QString* error);
bool condition_holds(const LessonCondition& c, const LessonFacts& facts);
// The first unknown {name} in a caption's text, or empty when every placeholder is a fact.
QString unknown_placeholder(const QString& text);
// The caption with each {name} replaced by the fact's value.
QString render_caption(const QString& text, const LessonFacts& facts);

}  // namespace kvs::app
