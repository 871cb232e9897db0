#pragma once
// The quantization comparison table of the loaded model: one row per scheme (reference,
// INT8 RTN, LLM.int8(), NF4, FP4, INT4 RTN, GPTQ, GPTQ act-order, AWQ, Q4_K_M-style GGUF,
// Q8_0) with bits per weight, size, perplexity ± error, ln(PPL / PPL of the reference) and
// ln(PPL / PPL of INT4 RTN) on the same tokens ± their paired standard errors (what tells two
// rows apart: a tooltip says how many errors each is), mean KL, top-1 agreement, first
// greedy divergence and prefill / decode speed (mean ± sd of the runs, each run in the
// cell's tooltip), sortable by any column (numbers sort as numbers, missing values last);
// beside it a speed-vs-quality scatter plot: decode tok/s up,
// mean KL (log axis; the reference, at KL 0, is a dashed line at its speed) or ΔPPL across,
// a labelled point per scheme (labels never over another label or marker:
// ui/label_placement). Run (in the background, by the app) with a progress bar and
// Cancel; Load JSON; export CSV / JSON (written by the app in the table's format) and PNG
// (the whole view). Plain ui types only (ui/quant_table_types.h).
#include <QRectF>
#include <QWidget>

#include "ui/quant_table_types.h"

class QCheckBox;
class QComboBox;
class QCustomPlot;
class QCPItemLine;
class QCPItemText;
class QLabel;
class QProgressBar;
class QPushButton;
class QSpinBox;
class QTableWidget;

namespace kvs::ui {

class QuantTableView : public QWidget {
    Q_OBJECT
public:
    enum class QualityAxis { MeanKl, DeltaPpl };
    // The table's columns, in order.
    enum Column {
        ColOrder,  // the row's place in the table as given (the order); sorted by it at first
        ColScheme,
        ColBits,
        ColSize,
        ColPpl,
        ColVsRef,  // ln(PPL / PPL of the reference), paired
        ColVsRtn,  // ln(PPL / PPL of INT4 RTN), paired
        ColKl,
        ColTop1,
        ColDivergence,
        ColPrefill,
        ColDecode,
        ColNote,
        NColumns
    };

    explicit QuantTableView(QWidget* parent = nullptr);
    QSize sizeHint() const override { return {900, 640}; }

    void setTable(const QuantTableInfo& table);
    const QuantTableInfo& table() const { return m_table; }
    QuantTableRequest request() const;  // what Run would ask for now

    void setQualityAxis(QualityAxis axis);
    QualityAxis qualityAxis() const { return m_axis; }

    // Whether a model is loaded (Run needs one); `why` is shown when not.
    void setReady(bool ready, const QString& why = {});
    // A run goes on: Run off, Cancel on, the bar at fraction (0..1) with `stage` beside it.
    void setProgress(const QString& stage, double fraction);
    // The run ended: its table is shown (setTable) and `message` in the status line.
    void finish(const QString& message);
    // The run failed or was cancelled: the message in the status line; Run is on again.
    void showError(const QString& message);
    // A status line message (e.g. "Saved table.csv").
    void showStatus(const QString& message);
    bool running() const { return m_running; }

    // PNG of the whole view (table and plot); false when it cannot be written.
    bool savePng(const QString& path);

    // What is drawn, for tests and screenshots.
    QTableWidget* tableWidget() const { return m_tableWidget; }
    QCustomPlot* plot() const { return m_plot; }
    QProgressBar* progressBar() const { return m_progress; }
    QString statusText() const;
    // The scatter's points in data coordinates with their labels (rows with both values).
    struct Point {
        double x = 0, y = 0;
        QString label;
    };
    const QVector<Point>& points() const { return m_points; }
    // The scatter's labels as drawn at the last replot, in the plot widget's pixels: each
    // label's box (read back from its QCustomPlot text item), its point's marker centre and
    // whether a leader line joins them (ui/label_placement places them on every replot, so
    // after a resize or a change of axes too).
    struct LabelBox {
        QString text;
        QRectF rect;
        QPointF point;
        bool leader = false;
    };
    QVector<LabelBox> labelBoxes() const;
    // The schemes in the table's current (sorted) row order.
    QStringList schemeOrder() const;

Q_SIGNALS:
    void runRequested(const kvs::ui::QuantTableRequest& request);
    void cancelRequested();
    void loadJsonRequested(const QString& path);
    void exportJsonRequested(const QString& path);
    void exportCsvRequested(const QString& path);

protected:
    void changeEvent(QEvent* ev) override;

private:
    QWidget* buildControls();
    void fillTable();
    void rebuildPlot();
    void layoutLabels();
    void setRunning(bool running);
    QString askPath(const QString& title, const QString& filter, bool save);
    void exportPngAsked();

    QuantTableInfo m_table;
    QualityAxis m_axis = QualityAxis::MeanKl;
    bool m_ready = false;
    bool m_running = false;
    QVector<Point> m_points;
    // A scatter point's label: its text, the leader line shown when the text is away from
    // the point, and the point in data coordinates.
    struct PointLabel {
        QCPItemText* text = nullptr;
        QCPItemLine* leader = nullptr;
        double x = 0, y = 0;
    };
    QVector<PointLabel> m_labels;
    QCPItemText* m_refCaption = nullptr;  // "reference (KL 0)": labels keep clear of it

    QPushButton* m_run = nullptr;
    QPushButton* m_cancel = nullptr;
    QSpinBox* m_evalTokens = nullptr;
    QSpinBox* m_calibTokens = nullptr;
    QCheckBox* m_speed = nullptr;
    QSpinBox* m_speedRuns = nullptr;
    QComboBox* m_axisBox = nullptr;
    QProgressBar* m_progress = nullptr;
    QLabel* m_status = nullptr;
    QLabel* m_caption = nullptr;
    QTableWidget* m_tableWidget = nullptr;
    QCustomPlot* m_plot = nullptr;
};

}  // namespace kvs::ui
