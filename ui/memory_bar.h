#pragma once
// A horizontal stacked bar of memory parts (weights, KV, scratch), against an optional
// capacity: a marker, and the part past it hatched red. The memory planner and the
// metrics view both draw one.
#include <QColor>
#include <QVector>
#include <QWidget>

namespace kvs::ui {

class MemoryBar : public QWidget {
    Q_OBJECT
public:
    struct Segment {
        QString name;
        qint64 bytes = 0;
        QColor color;
    };
    explicit MemoryBar(QWidget* parent = nullptr);
    void setSegments(const QVector<Segment>& segments);
    void setCapacity(qint64 bytes);  // 0: no capacity, the bar spans the total
    const QVector<Segment>& segments() const { return m_segments; }
    qint64 capacity() const { return m_capacity; }
    qint64 total() const;
    QRect barRect() const;    // the bar itself, without the caption
    QString caption() const;  // the text under the bar

    static QColor weightsColor() { return QColor(0x5C, 0x6B, 0xC0); }
    static QColor kvColor() { return QColor(0x26, 0xA6, 0x9A); }
    static QColor scratchColor() { return QColor(0xF0, 0xA2, 0x2E); }
    static QColor fitColor() { return QColor(0x2E, 0x9E, 0x44); }
    static QColor overColor() { return QColor(0xD6, 0x3B, 0x3B); }

    QSize sizeHint() const override;
    QSize minimumSizeHint() const override;

protected:
    void paintEvent(QPaintEvent*) override;
    bool event(QEvent* ev) override;

private:
    QVector<Segment> m_segments;
    qint64 m_capacity = 0;
};

}  // namespace kvs::ui
