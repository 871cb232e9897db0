#pragma once
// A chat's context gauge: "Context: N of M tokens" as a bar (amber from 90 %, red when full),
// and the chat's choice for when it is full: stop with a message, or drop the oldest turns
// from what the model sees (they stay in the transcript).
#include <QWidget>

class QComboBox;
class QProgressBar;

namespace kvs::ui {

class ContextGauge : public QWidget {
    Q_OBJECT
public:
    explicit ContextGauge(QWidget* parent = nullptr);

    // used: the conversation's tokens as the model sees it (with its template); limit: the
    // context in tokens, 0 when no model is loaded (the bar then says so).
    void setUsage(int used, int limit);
    int used() const { return m_used; }
    int limit() const { return m_limit; }
    QString text() const;  // what the bar shows
    // "stop" or "drop-oldest".
    void setPolicy(const QString& policy);
    QString policy() const;

Q_SIGNALS:
    void policyChanged(const QString& policy);  // the user chose another

private:
    QProgressBar* m_bar;
    QComboBox* m_policy;
    int m_used = 0;
    int m_limit = 0;
};

}  // namespace kvs::ui
