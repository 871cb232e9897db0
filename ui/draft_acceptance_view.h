#pragma once
// The draft acceptance view: how speculative decoding went for one request. Its text with
// every token coloured by fate (accepted drafts, the target's corrections and bonus
// tokens; refused and discarded drafts struck through where they were proposed), the
// accepted-length histogram, the acceptance rate per draft position, and the figures:
// alpha, mean accepted drafts, tokens per target pass measured beside the theory
// (1 - alpha^(k+1)) / (1 - alpha), draft time vs verify time, and the speed-up over a
// plain request measured in the same session when there is an honest one.
// Plain ui types only (ui/view_types.h SpecFrame).
#include <QColor>
#include <QList>
#include <QWidget>

#include "ui/view_types.h"

class QComboBox;
class QCPBars;
class QCPAxisRect;
class QCPItemStraightLine;
class QCustomPlot;
class QGridLayout;
class QLabel;
class QLayout;
class QPalette;
class QTextBrowser;
class QTextCharFormat;
class QTextDocument;

namespace kvs::ui {

class DraftAcceptanceView : public QWidget {
    Q_OBJECT
public:
    explicit DraftAcceptanceView(QWidget* parent = nullptr);
    QSize sizeHint() const override;

    void setFrame(const SpecFrame& frame);
    // Shows this request when the frame has it; 0: the newest request.
    void setSelectedRequest(qint64 id);
    qint64 shownRequest() const { return m_shown; }
    const SpecFrame& frame() const { return m_frame; }

    // What is drawn, for tests and screenshots.
    QTextDocument* document() const;
    QCPBars* histogramBars() const { return m_hist; }
    QCPBars* positionBars() const { return m_pos; }
    // A figure's text by name: "alpha", "meanAccepted", "tokensPerPass", "theory",
    // "draftVerify", "speedup", "counts".
    QString figure(const QString& name) const;

    // The hue of each fate, and the character format a token of that fate gets.
    static QColor fateColor(TokenFate f, const QPalette& pal);
    static QTextCharFormat fateFormat(TokenFate f, const QPalette& pal);
    static QString fateName(TokenFate f);
    // (1 - alpha^(k+1)) / (1 - alpha); k + 1 at alpha = 1.
    static double theoreticalTokensPerPass(double alpha, double k);

Q_SIGNALS:
    void requestSelected(qint64 id);

protected:
    void changeEvent(QEvent* ev) override;

private:
    const SpecRequestFrame* shown() const;
    void refillPicker();
    void refresh();  // everything for the shown request
    void renderText(const SpecRequestFrame* r);
    void appendTokens(const SpecRequestFrame& r, int from);
    void fillPlots(const SpecRequestFrame* r);
    void fillFigures(const SpecRequestFrame* r);
    void restyle();
    QLayout* buildFigures();  // the figures grid; the counts label under it is created too
    void buildPlots();
    QLabel* addFigure(int col, const QString& caption, const char* name, const QString& tip);

    SpecFrame m_frame;
    qint64 m_wanted = 0;  // the user's or caller's choice (0: newest)
    qint64 m_shown = 0;   // the request drawn now
    // What the text shows, so new tokens are appended instead of redrawn.
    qint64 m_textId = 0;
    int m_textCount = 0;
    qint64 m_textFirstStep = -1;

    QComboBox* m_pick = nullptr;
    QLabel* m_legend = nullptr;
    QGridLayout* m_figuresGrid = nullptr;
    QList<QLabel*> m_captions;
    QLabel* m_alpha = nullptr;
    QLabel* m_meanAccepted = nullptr;
    QLabel* m_perPass = nullptr;
    QLabel* m_theory = nullptr;
    QLabel* m_draftVerify = nullptr;
    QLabel* m_speedup = nullptr;
    QLabel* m_counts = nullptr;
    QTextBrowser* m_text = nullptr;
    QCustomPlot* m_plot = nullptr;
    QCPAxisRect* m_histRect = nullptr;
    QCPAxisRect* m_posRect = nullptr;
    QCPBars* m_hist = nullptr;
    QCPBars* m_pos = nullptr;
    QCPItemStraightLine* m_alphaLine = nullptr;
};

}  // namespace kvs::ui
