#pragma once
// The memory planner: the KV-cache formula as an interactive calculator.
//
//   bytes per token = 2 (K and V) × layers × kv_heads × head_dim × dtype bytes
//                     (INT8: 34 bytes per 32 values, the engine's Q8_0 blocks with their scales)
//   per block       = block_size × bytes per token
//   per sequence    = ceil(context / block_size) blocks     (paged: whole blocks)
//   KV              = batch × per sequence;   total = weights + KV + scratch
//
// Below the result, the same model as MHA / GQA / MQA side by side and split over a
// tensor-parallel degree: KV per variant and per GPU, weights per GPU, all-reduce bytes per
// token (MemorySizing::parallel, whose header gives the formulas and their source).
//
// MemoryPlannerView is the calculator with model presets; the arithmetic lives in
// ui/memory_sizing.h (MemorySizing, tested without a widget) and the stacked weights /
// KV / scratch bar in ui/memory_bar.h. The bytes per token are the engine's own number
// (kv_cache_bytes_per_token, engine/kv_cache/kv_tensors.h): the app hands the planner a
// function that computes it (setKvBytesPerTokenFn); the formula above is only shown.
#include <QWidget>

#include "ui/memory_sizing.h"

class QComboBox;
class QDoubleSpinBox;
class QLabel;
class QLayout;
class QSpinBox;

namespace kvs::ui {

class MemoryBar;

class MemoryPlannerView : public QWidget {
    Q_OBJECT
public:
    explicit MemoryPlannerView(QWidget* parent = nullptr);

    // Where the planner gets KV bytes per token for the shape and KV type on screen: the
    // engine's kv_cache_bytes_per_token(ModelConfig, DType), wrapped by the app (ui/ never
    // includes engine headers), e.g.
    //   planner->setKvBytesPerTokenFn([](int nLayer, int nKvHead, int headDim, bool int8) {
    //       ModelConfig c; c.n_layer = nLayer; c.n_kv_head = nKvHead; c.head_dim = headDim;
    //       return qint64(kv_cache_bytes_per_token(c, int8 ? DType::Q8_0 : DType::F16)); });
    // Until one is set the plan is invalid and the planner says the number is missing.
    // Recomputes at once.
    void setKvBytesPerTokenFn(KvBytesPerTokenFn fn);

    // The model the program has loaded: listed first as "Loaded: <name>" and selected.
    void setLoadedModel(const QString& name, int layers, int kvHeads, int headDim, qint64 weightBytes, int heads = 0);
    void setAvailableMemory(qint64 bytes);  // e.g. the machine's RAM or the GPU's VRAM
    void setInputs(const MemoryInputs& in);
    MemoryInputs inputs() const;
    MemoryPlan currentPlan() const { return m_plan; }
    bool selectPreset(const QString& name);  // a name from presetNames()
    QStringList presetNames() const;
    QString resultText() const;  // the formula and verdict as plain text
    // Attention variants and tensor parallelism: query heads, GQA group, TP degree (1, 2, 4, 8).
    void setParallelInputs(const ParallelInputs& p);
    ParallelInputs parallelInputs() const;
    ParallelPlan parallelPlan() const { return m_parallelPlan; }
    QString parallelText() const;  // the variants table as plain text

    QSize sizeHint() const override;

Q_SIGNALS:
    void planChanged(const kvs::ui::MemoryPlan& plan);

protected:
    void changeEvent(QEvent* ev) override;

private:
    void createInputs();    // the input widgets, before they are laid out
    QLayout* inputForms();  // model / KV cache / memory groups
    QWidget* resultBox();   // formula, verdict, bar, limits
    QWidget* parallelBox();  // MHA / GQA / MQA and tensor parallelism
    void recomputeParallel(const MemoryInputs& in);
    void connectInputs();
    void applyPreset(int index);
    void applyWeightFormat();
    void recompute();
    void markCustom();
    QString formulaHtml(const MemoryInputs& in) const;  // of m_plan
    QString limitsHtml(const MemoryInputs& in) const;
    void showVerdict();

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
    QSpinBox* m_heads;
    QSpinBox* m_group;
    QComboBox* m_tp;
    QLabel* m_parallel;
    ParallelPlan m_parallelPlan;

    QVector<ModelPreset> m_presets;  // index 0: the loaded model when there is one
    bool m_hasLoaded = false;
    qint64 m_presetParameters = 0;  // of the selected preset, for the weight format combo
    bool m_applying = false;
    MemoryPlan m_plan;
    KvBytesPerTokenFn m_kvBytesPerToken;
};

}  // namespace kvs::ui
