#pragma once
// The chat's speculative decoding settings in the Sampling panel: the proposer (off,
// prompt lookup, layer-skip draft, int4 self-draft), draft length k and adaptive k.
// Stored per conversation with the other sampling fields (ChatSettings).
#include <QWidget>

#include "app/engine_bridge.h"

class QCheckBox;
class QComboBox;
class QSpinBox;

namespace kvs::app {

class SpeculativeForm : public QWidget {
    Q_OBJECT
public:
    explicit SpeculativeForm(QWidget* parent = nullptr);
    void load(const ChatSettings& s);
    void store(ChatSettings* s) const;
    // The drafts the loaded model has (EngineBridge::draftChoices): the others are greyed out.
    void setAvailableDrafts(const QStringList& names);

private:
    void updateEnabled();
    QComboBox* m_mode;
    QSpinBox* m_k;
    QCheckBox* m_adaptive;
};

}  // namespace kvs::app
