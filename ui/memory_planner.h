#pragma once
// The memory planner: the KV-cache formula as an interactive calculator.
//
//   bytes per token = 2 (K and V) × layers × kv_heads × head_dim × dtype bytes
//                     (INT8: 34 bytes per 32 values, the engine's Q8_0 blocks with their scales)
//   per block       = block_size × bytes per token
//   per sequence    = ceil(context / block_size) blocks     (paged: whole blocks)
//   KV              = batch × per sequence;   total = weights + KV + scratch
//
// MemoryPlanner holds the arithmetic as pure functions (tested without a widget);
// MemoryPlannerView is the calculator with model presets, and MemoryBar the stacked
// weights / KV / scratch bar it shares with the metrics view.
#include <QColor>
#include <QVector>
#include <QWidget>

class QComboBox;
class QDoubleSpinBox;
class QLabel;
class QSpinBox;

namespace kvs::ui {

struct MemoryInputs {
    int layers = 30;
    int kvHeads = 3;
    int headDim = 64;
    qint64 context = 2048;        // tokens per sequence
    qint64 batch = 1;             // sequences
    int kvDtypeBytes = 2;         // FP16 2, INT8 1 (Q8_0 blocks: 34 bytes per 32 values)
    int blockSize = 16;           // tokens per KV block
    qint64 weightBytes = 0;
    qint64 scratchBytes = 0;      // activations, logits, runtime: whatever else must fit
    qint64 availableBytes = 0;    // RAM or VRAM to fit into
};

struct MemoryPlan {
    bool valid = false;
    QString error;                // why not valid: names the input
    qint64 bytesPerToken = 0;
    qint64 bytesPerBlock = 0;
    qint64 blocksPerSequence = 0;
    qint64 kvBytesPerSequence = 0;    // whole blocks
    qint64 kvBytes = 0;               // batch × per sequence
    qint64 kvBytesUnpaged = 0;        // batch × context × bytes per token (no block rounding)
    qint64 totalBytes = 0;            // weights + KV + scratch
    qint64 headroomBytes = 0;         // available - total (negative: over)
    bool fits = false;
    qint64 maxBlocks = 0;             // KV blocks that fit next to weights and scratch
    qint64 maxBatch = 0;              // sequences of `context` tokens that fit
    qint64 maxContext = 0;            // tokens per sequence for `batch` sequences (whole blocks)
};

// A model's KV-relevant shape (values from its config.json) and weight size.
struct ModelPreset {
    QString name;
    int layers = 0;
    int kvHeads = 0;
    int headDim = 0;
    qint64 parameters = 0;        // for weights = parameters × bits per weight / 8
    QString weightFormat;         // default format (a name from weightFormats())
    qint64 knownWeightBytes = 0;  // measured size of that format's file, 0: compute
};

struct WeightFormat {
    QString name;
    double bitsPerWeight = 0;     // 0: "file size", typed by hand
};

struct MemoryPlanner {
    static qint64 bytesPerToken(int layers, int kvHeads, int headDim, int dtypeBytes);
    static MemoryPlan plan(const MemoryInputs& in);
    static QVector<ModelPreset> presets();
    static QVector<WeightFormat> weightFormats();
    static qint64 weightBytes(qint64 parameters, double bitsPerWeight);
    static QString formatBytes(qint64 bytes);   // "92 MiB", "22.5 KiB", "1.3 GiB"
};

// A horizontal stacked bar of memory parts, against an optional capacity (a marker; the
// part past it is hatched red).
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
    void setCapacity(qint64 bytes);               // 0: no capacity, the bar spans the total
    const QVector<Segment>& segments() const { return m_segments; }
    qint64 capacity() const { return m_capacity; }
    qint64 total() const;
    QRect barRect() const;                        // the bar itself, without the caption
    QString caption() const;                      // the text under the bar

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

class MemoryPlannerView : public QWidget {
    Q_OBJECT
public:
    explicit MemoryPlannerView(QWidget* parent = nullptr);

    // The model the program has loaded: listed first as "Loaded: <name>" and selected.
    void setLoadedModel(const QString& name, int layers, int kvHeads, int headDim, qint64 weightBytes);
    void setAvailableMemory(qint64 bytes);        // e.g. the machine's RAM or the GPU's VRAM
    void setInputs(const MemoryInputs& in);
    MemoryInputs inputs() const;
    MemoryPlan currentPlan() const { return m_plan; }
    bool selectPreset(const QString& name);       // a name from presetNames()
    QStringList presetNames() const;
    QString resultText() const;                   // the formula and verdict as plain text

    QSize sizeHint() const override;

Q_SIGNALS:
    void planChanged(const kvs::ui::MemoryPlan& plan);

protected:
    void changeEvent(QEvent* ev) override;

private:
    void applyPreset(int index);
    void applyWeightFormat();
    void recompute();
    void markCustom();

    QComboBox* m_preset;
    QSpinBox* m_layers;
    QSpinBox* m_kvHeads;
    QSpinBox* m_headDim;
    QComboBox* m_weightFormat;
    QDoubleSpinBox* m_weightMiB;
    QSpinBox* m_context;
    QSpinBox* m_batch;
    QComboBox* m_dtype;
    QSpinBox* m_blockSize;
    QDoubleSpinBox* m_availableGiB;
    QDoubleSpinBox* m_scratchMiB;
    QLabel* m_formula;
    QLabel* m_verdict;
    QLabel* m_limits;
    MemoryBar* m_bar;

    QVector<ModelPreset> m_presets;   // index 0: the loaded model when there is one
    bool m_hasLoaded = false;
    qint64 m_presetParameters = 0;    // of the selected preset, for the weight format combo
    bool m_applying = false;
    MemoryPlan m_plan;
};

}  // namespace kvs::ui
