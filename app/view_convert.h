#pragma once
// Engine telemetry (engine/telemetry/snapshot.h) -> what the views draw (ui/view_types.h).
// The only translation between the two worlds; the ui/ library never sees engine types.
#include <QString>
#include <QStringList>
#include <functional>
#include <vector>

#include "engine/telemetry/snapshot.h"
#include "ui/view_types.h"

namespace kvs::app {

ui::StepPoint to_step_point(const StepRecord& r);

// label(id) names a request in the views ("chat 2", "req 17"); empty: "req <id>".
ui::EngineFrame to_frame(const EngineSnapshot& s, const std::function<QString(RequestId)>& label = {});

// Only the request rows (no block map): what the slot timeline needs of every step.
QVector<ui::RequestRow> to_request_rows(const EngineSnapshot& s, const std::function<QString(RequestId)>& label = {});

// What the request did in the snapshot's step.
ui::SlotState slot_state(const RequestView& r, const EngineSnapshot& s);

// Speculative decoding -> the draft acceptance view. pieces(ids) gives each token's text
// (one string per id); a request keeps its newest maxTokens token fates.
ui::SpecFrame to_spec_frame(const SpecSnapshot& s, const std::function<QString(RequestId)>& label,
                            const std::function<QStringList(const std::vector<int32_t>&)>& pieces,
                            int maxTokens = 2048);
ui::TokenFate to_fate(TokenFate f);
// "ngram" -> "prompt lookup"; a draft model's name as it is.
QString proposer_label(const std::string& proposer);

}  // namespace kvs::app
