#pragma once
// The chat's beam search and minimum length in the Sampling panel: beams (off, or 2..8:
// the reply is the best hypothesis, shown when the search ends), the length penalty that
// ranks hypotheses (sum of log-probabilities / length^penalty, as Hugging Face and vLLM
// define length_penalty: above 0 favours longer replies, below 0 shorter), and min new
// tokens (no end-of-generation or stop string before that many tokens; with or without
// beams). Stored per conversation with the other sampling fields (ChatSettings).
#include <QWidget>

#include "app/engine_bridge.h"

class QDoubleSpinBox;
class QSpinBox;

namespace kvs::app {

class BeamSearchForm : public QWidget {
    Q_OBJECT
public:
    explicit BeamSearchForm(QWidget* parent = nullptr);
    void load(const ChatSettings& s);
    void store(ChatSettings* s) const;

private:
    void updateEnabled();
    QSpinBox* m_beams;
    QDoubleSpinBox* m_lengthPenalty;
    QSpinBox* m_minNew;
};

}  // namespace kvs::app
