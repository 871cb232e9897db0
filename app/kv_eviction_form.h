#pragma once
// The chat's KV eviction in the Sampling dock (engine/kv_cache/kv_eviction.h): a policy
// (off, StreamingLLM, H2O, SnapKV, merge) and a budget in tokens or % of the context, stored
// as ChatSettings::kvEviction ("h2o:512", "streaming:0.5", "" for off).
#include <QWidget>

#include "app/engine_bridge.h"

class QComboBox;
class QSpinBox;

namespace kvs::app {

class KvEvictionForm : public QWidget {
    Q_OBJECT
public:
    explicit KvEvictionForm(QWidget* parent = nullptr);
    void load(const ChatSettings& s);
    void store(ChatSettings* s) const;
    // The setting as ChatSettings::kvEviction spells it ("" when off).
    QString spec() const;

private:
    void updateEnabled();
    QComboBox* m_policy;
    QSpinBox* m_budget;
    QComboBox* m_unit;  // tokens or % of the context
};

}  // namespace kvs::app
