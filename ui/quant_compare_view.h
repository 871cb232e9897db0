#pragma once
// The quantization compare view: a reference model and a quantized variant answering the
// same prompt side by side. Two text columns stream the two models' tokens; the first
// position where their picks differ is highlighted in both and named ("first divergence
// at token N"); after it the variant is teacher-forced (fed the reference's tokens), so
// its column shows what it would pick at each position of the reference's text. A plot
// draws the per-token KL(reference || variant) and the running top-1 agreement; figures
// give each model's weight memory, bits per weight and decode speed in this comparison.
// Plain ui types only (ui/view_types.h QuantTokenEvent, QuantSideInfo).
#include <QColor>
#include <QVector>
#include <QWidget>

#include "ui/view_types.h"

class QComboBox;
class QCPGraph;
class QCPItemStraightLine;
class QCustomPlot;
class QDoubleSpinBox;
class QLabel;
class QPlainTextEdit;
class QProgressBar;
class QPushButton;
class QSpinBox;
class QTextBrowser;
class QTextDocument;

namespace kvs::ui {

class QuantCompareView : public QWidget {
    Q_OBJECT
public:
    explicit QuantCompareView(QWidget* parent = nullptr);
    QSize sizeHint() const override;

    // The picker's choices (QuantScheme spellings) and the one selected.
    void setSchemes(const QStringList& schemes, const QString& current);
    QString scheme() const;
    void setScheme(const QString& scheme);
    QString prompt() const;
    void setPrompt(const QString& prompt);
    QuantCompareRequest request() const;  // what Compare would ask for now

    // Whether a model is loaded (Compare needs one); `why` is shown when not.
    void setReady(bool ready, const QString& why = {});
    // A comparison was asked for: Compare off, Stop on, `what` beside a busy bar.
    void setBusy(const QString& what);
    // A variant being built: `what` beside a bar at `fraction` (0..1); Stop cancels the build.
    void setBuildProgress(const QString& what, double fraction);
    // A new comparison starts: both columns and the plot are cleared.
    // A new run was asked for: the previous result leaves the screen at once.
    void clearResult();
    void begin(const QuantSideInfo& reference, const QuantSideInfo& variant);
    void appendEvent(const QuantTokenEvent& ev);
    // The comparison ended (summary: why, e.g. "max tokens"); Compare is on again.
    void finish(const QString& summary);
    // The comparison could not run: the message in the status line; Compare is on again.
    void showError(const QString& message);

    // What is drawn, for tests and screenshots.
    const QVector<QuantTokenEvent>& events() const { return m_events; }
    int firstDivergence() const { return m_firstDivergence; }  // -1: none yet
    double top1Percent() const;
    QTextDocument* referenceDocument() const;
    QTextDocument* variantDocument() const;
    QCPGraph* klGraph() const { return m_kl; }
    QCPGraph* top1Graph() const { return m_top1; }
    // A figure's text by name: "refLabel", "variantLabel", "refWeights", "variantWeights",
    // "refBits", "variantBits", "refSpeed", "variantSpeed", "top1", "kl", "divergence", "status".
    QString figure(const QString& name) const;

    // The tint both columns give the first divergent token.
    static QColor divergenceColor(const QPalette& pal);
    // The tint of a teacher-forced variant pick that is not the reference's token.
    static QColor disagreeColor(const QPalette& pal);

Q_SIGNALS:
    void compareRequested(const kvs::ui::QuantCompareRequest& request);
    void stopRequested();

protected:
    void changeEvent(QEvent* ev) override;

private:
    void buildControls();
    void buildFigures();
    QWidget* buildColumns(const QFont& bold);  // the two text columns with their labels and figures
    void buildPlot();
    void setRunning(bool running);
    void appendPiece(QTextBrowser* column, const QString& text, const QuantTokenEvent& ev, bool variant);
    void updateFigures();
    void updatePlot();
    void restyle();
    QLabel* addFigure(const char* name);

    QVector<QuantTokenEvent> m_events;
    int m_firstDivergence = -1;
    bool m_ready = false;
    bool m_running = false;
    QuantSideInfo m_ref, m_var;

    QComboBox* m_scheme = nullptr;
    QSpinBox* m_maxTokens = nullptr;
    QDoubleSpinBox* m_temperature = nullptr;
    QSpinBox* m_seed = nullptr;
    QPushButton* m_compare = nullptr;
    QPushButton* m_stop = nullptr;
    QProgressBar* m_busy = nullptr;
    QPlainTextEdit* m_prompt = nullptr;
    QLabel* m_status = nullptr;
    QList<QLabel*> m_figures;
    QLabel* m_forcedCaption = nullptr;
    QTextBrowser* m_refText = nullptr;
    QTextBrowser* m_varText = nullptr;
    QCustomPlot* m_plot = nullptr;
    QCPGraph* m_kl = nullptr;
    QCPGraph* m_top1 = nullptr;
    QCPItemStraightLine* m_divLine = nullptr;
};

}  // namespace kvs::ui
