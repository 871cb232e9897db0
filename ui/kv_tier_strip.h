#pragma once
// The KV tiers under the block map: three bars, one per tier - the device pool (blocks used,
// cached, free), the CPU tier and the disk store (bytes held of their limit) - each with its
// blocks and the prompt tokens it answered as prefix hits since the engine started, and a
// caption with the blocks spilled down and the bad files skipped. Hidden while the engine has
// no tiers. Takes ui/view_types.h frames only.
#include <QWidget>

#include "ui/view_types.h"

namespace kvs::ui {

class KvTierStrip : public QWidget {
    Q_OBJECT
public:
    explicit KvTierStrip(QWidget* parent = nullptr);

    void setFrame(const EngineFrame& frame);
    // The words of each row (0 device pool, 1 CPU tier, 2 disk) and of the caption (3), as drawn.
    QString rowText(int row) const;
    // The filled fraction of a row's bar (device: used + cached blocks of all).
    double rowFill(int row) const;

    QSize sizeHint() const override;
    QSize minimumSizeHint() const override;

protected:
    void paintEvent(QPaintEvent* e) override;

private:
    EngineFrame m_frame;
    int m_used = 0, m_cached = 0, m_free = 0;
};

}  // namespace kvs::ui
