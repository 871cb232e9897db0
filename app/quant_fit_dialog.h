#pragma once
// Tools ▸ Which quantization fits?: the chooser of engine/quant/quant_fit.h in a dialog (not
// modal). Inputs: the model (the loaded one, a preset with published perplexities, or a
// parameter count with its KV shape), the device (CPU or GPU, memory in GiB; CPU starts at
// this machine's available RAM), the goal, context, batch, KV type, and optionally a
// comparison table (`kvscope eval --all --json`) for measured quality. Output: every scheme
// ranked for the goal with its weights, KV room, fit and quality, the best one named with
// its reason in a line above, and the assumptions and sources below. Everything is
// recomputed at once on every change (no model runs: only sizes and table look-ups).
#include <QDialog>
#include <functional>
#include <memory>

class QComboBox;
class QDoubleSpinBox;
class QLabel;
class QLineEdit;
class QSpinBox;
class QTableWidget;
class QWidget;

namespace kvs {
struct Model;
}

namespace kvs::app {

class QuantFitDialog : public QDialog {
    Q_OBJECT
public:
    // loadedModel: the window's model now (may return null: no model loaded).
    explicit QuantFitDialog(std::function<std::shared_ptr<const Model>()> loadedModel, QWidget* parent = nullptr);

    // Columns of the result table.
    enum Column { Rank, Scheme, Bits, Weights, KvRoom, Fits, MaxBatch, MaxContext, Quality, Why, NColumns };

public Q_SLOTS:
    void recompute();
    // The model choices again (the loaded model may have changed).
    void refreshModels();

private:
    void buildInputs();
    void updateInputsEnabled();

    std::function<std::shared_ptr<const Model>()> m_loadedModel;
    QComboBox* m_model = nullptr;
    QDoubleSpinBox* m_params = nullptr;  // billions
    QSpinBox* m_layers = nullptr;
    QSpinBox* m_kvHeads = nullptr;
    QSpinBox* m_headDim = nullptr;
    QWidget* m_paramsBox = nullptr;
    QComboBox* m_device = nullptr;
    QDoubleSpinBox* m_memory = nullptr;  // GiB
    QComboBox* m_goal = nullptr;
    QSpinBox* m_context = nullptr;
    QSpinBox* m_batch = nullptr;
    QComboBox* m_kvType = nullptr;
    QLineEdit* m_table = nullptr;
    QLabel* m_summary = nullptr;
    QLabel* m_error = nullptr;
    QTableWidget* m_result = nullptr;
    QLabel* m_notes = nullptr;
    double m_cpuMemoryGib = 0;  // this machine's available RAM when the dialog opened
};

}  // namespace kvs::app
