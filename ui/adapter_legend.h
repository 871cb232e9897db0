#pragma once
// Requests by LoRA adapter, the same in every view: the adapters a frame's requests run with
// (RequestRow::adapter, "" for the base model), a colour per adapter (the base model a
// neutral grey, adapters a fixed qualitative set in name order, so a frame's adapters never
// share a colour while there are at most kAdapterColors of them), and the legend strip the
// KV block map shows under its grid while any request in the frame runs with an adapter:
// "LoRA adapters (requests): ■ base 1 ■ cowboy 1 ■ pirate 2 ...", each with its requests in the
// frame (the request table's, finished ones included).
#include <QColor>
#include <QStringList>
#include <QWidget>

#include "ui/view_types.h"

namespace kvs::ui {

inline constexpr int kAdapterColors = 6;

// The adapters of the frame's requests, sorted by name, without "" (the base model).
QStringList frameAdapters(const EngineFrame& f);
// The colour of `adapter` among `adapters` (frameAdapters); "" or an unknown name: the base's grey.
QColor adapterColor(const QStringList& adapters, const QString& adapter);

class AdapterLegend : public QWidget {
    Q_OBJECT
public:
    explicit AdapterLegend(QWidget* parent = nullptr);
    // Shown while the frame has a request with an adapter, hidden otherwise.
    void setFrame(const EngineFrame& f);
    // What it shows, in words ("base 1, cowboy 1, pirate 2"); "" while hidden.
    QString text() const { return m_text; }
    QSize sizeHint() const override;
    QSize minimumSizeHint() const override { return {0, sizeHint().height()}; }

protected:
    void paintEvent(QPaintEvent* e) override;

private:
    struct Entry {
        QString name;  // "" for the base model
        int requests = 0;
    };
    QStringList m_adapters;
    QVector<Entry> m_entries;
    QString m_text;
};

}  // namespace kvs::ui
