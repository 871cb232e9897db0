// ctest-labels: ui
// The Draft acceptance view from a recorded frame built here (plain ui types): the tokens'
// colours by fate in the document, the rejected and discarded drafts placed before the
// target's correction, the histogram and per-position bars, the figures (alpha, tokens per
// pass, the theory computed here as a geometric sum, the speed-up only with an honest
// baseline), request selection, appending without redrawing, and both themes readable.
// Saves screenshots under the build tree (tests/output/).
#include <QApplication>
#include <QPalette>
#include <QTextBlock>
#include <QTextDocument>
#include <QtTest>
#include <cmath>
#include <vector>

#include "ui/dark_palette.h"
#include "tests/support/test_paths.h"
#include "tests/support/widget_probe.h"
#include "ui/draft_acceptance_view.h"
#include "ui/qcp.h"
#include "ui/request_colors.h"

using kvs::ui::DraftAcceptanceView;
using kvs::ui::FateToken;
using kvs::ui::SpecFrame;
using kvs::ui::SpecRequestFrame;
using kvs::ui::TokenFate;

namespace {

using kvs::ui::dark_palette;
using kvs::test::format_of;

struct Verify {
    int drafted, accepted;
    bool bonus;
};

// The counts of a request whose verify passes went like `passes`, tallied by hand's rules:
// judged = accepted + 1 unless every draft was accepted; one token of the target's own per pass.
SpecRequestFrame requestFrom(qint64 id, const std::vector<Verify>& passes) {
    SpecRequestFrame r;
    r.id = id;
    r.label = QString("chat %1").arg(id);
    r.proposer = "prompt lookup";
    r.k = 4;
    r.posEvaluated.fill(0, 4);
    r.posAccepted.fill(0, 4);
    r.acceptedLenHist.fill(0, 5);
    for (const Verify& v : passes) {
        const int judged = v.bonus ? v.drafted : v.accepted + 1;
        ++r.verifySteps;
        r.drafted += v.drafted;
        r.evaluated += judged;
        r.accepted += v.accepted;
        r.discarded += v.drafted - judged;
        r.bonus += v.bonus;
        r.emitted += v.accepted + 1;
        r.sumK += v.drafted;
        for (int p = 0; p < judged; ++p) ++r.posEvaluated[p];
        for (int p = 0; p < v.accepted; ++p) ++r.posAccepted[p];
        ++r.acceptedLenHist[v.accepted];
    }
    r.draftMs = 3.5;
    r.verifyMs = 120;
    return r;
}

}  // namespace

class TestDraftAcceptanceView : public QObject {
    Q_OBJECT

    // Passes: 4 of 4 + bonus, 2 of 4, 0 of 4, 3 of 4, 4 of 4 + bonus, 1 of 2.
    const std::vector<Verify> m_passes = {{4, 4, true},  {4, 2, false}, {4, 0, false},
                                          {4, 3, false}, {4, 4, true},  {2, 1, false}};

    SpecFrame frame() const {
        SpecFrame f;
        f.step = 40;
        SpecRequestFrame r = requestFrom(7, m_passes);
        // One pass's story: "Hello" plain, " wor" " ld" accepted, "!" rejected at position 3,
        // " x" discarded at 4, then the target's "." (it comes after the rejected draft in the
        // engine's order, the discarded one after it); then a fully accepted pass with bonus.
        r.tokens = {{"Hello", TokenFate::Plain, 0, 10},    {" wor", TokenFate::Accepted, 1, 11},
                    {"ld", TokenFate::Accepted, 2, 11},    {"!", TokenFate::Rejected, 3, 11},
                    {".", TokenFate::Corrected, 0, 11},    {" x", TokenFate::Discarded, 4, 11},
                    {" Next", TokenFate::Accepted, 1, 12}, {" line", TokenFate::Bonus, 0, 12}};
        r.decodeTokPerS = 30;
        f.requests = {requestFrom(3, {{4, 1, false}}), r};
        f.requests[0].label = "chat 3";
        f.baselineTokPerS = 20;
        f.baselineLabel = "chat 1";
        return f;
    }

private Q_SLOTS:
    void tokensColouredByFate() {
        DraftAcceptanceView v;
        v.resize(900, 700);
        v.show();
        v.setFrame(frame());
        QCOMPARE(v.shownRequest(), qint64(7));  // the newest by default
        QTextDocument* doc = v.document();
        // Refused drafts stand where they were proposed, before the correction; their
        // spaces are made visible.
        QCOMPARE(doc->toPlainText(), QString("Hello world!\u00B7x. Next line"));
        const auto hue = [](const QColor& c) { return c.hslHue(); };
        const QTextCharFormat acc = format_of(doc, "wor"), cor = format_of(doc, "."), bon = format_of(doc, " line"),
                              rej = format_of(doc, "!"), dis = format_of(doc, "\u00B7x"),
                              plain = format_of(doc, "Hello");
        QVERIFY(acc.background().style() != Qt::NoBrush);
        QVERIFY2(hue(acc.background().color()) >= 90 && hue(acc.background().color()) <= 160,
                 qPrintable(acc.background().color().name()));  // green
        QVERIFY2(hue(cor.background().color()) >= 15 && hue(cor.background().color()) <= 45,
                 qPrintable(cor.background().color().name()));  // orange
        QVERIFY2(hue(bon.background().color()) >= 190 && hue(bon.background().color()) <= 230,
                 qPrintable(bon.background().color().name()));  // blue
        QVERIFY(rej.fontStrikeOut());
        const int rh = hue(rej.foreground().color());
        QVERIFY2((rh >= 0 && rh <= 15) || rh >= 345, qPrintable(rej.foreground().color().name()));  // red
        QVERIFY(rej.background().style() == Qt::NoBrush);
        QVERIFY(dis.fontStrikeOut());
        QVERIFY2(dis.foreground().color().hslSaturation() < 30, qPrintable(dis.foreground().color().name()));  // grey
        QVERIFY(!plain.fontStrikeOut() && plain.background().style() == Qt::NoBrush);
        QVERIFY(!acc.fontStrikeOut() && !cor.fontStrikeOut() && !bon.fontStrikeOut());
        QVERIFY(acc.toolTip().contains("draft position 1"));
        QTest::qWait(100);  // layout and the queued replot
        QVERIFY(v.grab().save(QString::fromStdString(kvs::test::output_path("draft_acceptance_view.png"))));
    }

    void barsAndFigures() {
        DraftAcceptanceView v;
        v.resize(900, 700);
        v.show();
        v.setFrame(frame());
        // Histogram: passes by drafts accepted, counted here from the list of passes.
        std::vector<int> hist(5, 0);
        for (const Verify& p : m_passes) ++hist[p.accepted];
        QCPBars* h = v.histogramBars();
        QCOMPARE(h->data()->size(), 5);
        for (int i = 0; i < 5; ++i) {
            QCOMPARE(h->data()->at(i)->key, double(i));
            QCOMPARE(h->data()->at(i)->value, double(hist[i]));
        }
        // Acceptance per position, judged drafts as the denominator: by hand,
        // position 1: judged in all 6 passes, accepted in 5 (all but the 0-of-4 pass);
        // position 2: judged in 5, accepted in 4 (4/4, 2/4, 3/4, 4/4); position 3: judged in
        // 4 (4/4, 2/4 rejected here, 3/4, 4/4), accepted in 3; position 4: judged in 3 (4/4,
        // 3/4 rejected here, 4/4), accepted in 2.
        const double expect[] = {500.0 / 6, 400.0 / 5, 300.0 / 4, 200.0 / 3};
        QCPBars* pos = v.positionBars();
        QCOMPARE(pos->data()->size(), 4);
        for (int i = 0; i < 4; ++i) {
            QCOMPARE(pos->data()->at(i)->key, double(i + 1));
            QVERIFY2(std::abs(pos->data()->at(i)->value - expect[i]) < 1e-9,
                     qPrintable(QString::number(pos->data()->at(i)->value)));
        }
        // alpha = accepted / judged = 14 / 18; mean k = 22 / 6; theory as a geometric sum.
        const double alpha = 14.0 / 18.0, k = 22.0 / 6.0;
        QVERIFY2(v.figure("alpha").startsWith("0.78") && v.figure("alpha").contains("14 / 18"),
                 qPrintable(v.figure("alpha")));
        // Tokens per pass: 14 accepted + 6 of the target's own over 6 passes.
        QVERIFY2(v.figure("tokensPerPass").startsWith("3.33"), qPrintable(v.figure("tokensPerPass")));
        // The theory at a non-integer mean k, from the series: (1 - a^(k+1)) / (1 - a) =
        // (1 - a^(k+1)) * sum_{i>=0} a^i, the sum taken to 2000 terms.
        double series = 0;
        for (int i = 0; i < 2000; ++i) series += std::pow(alpha, i);
        const double theory = series * (1.0 - std::pow(alpha, k + 1.0));
        QVERIFY2(v.figure("theory").startsWith(QString::number(theory, 'f', 2)),
                 qPrintable(v.figure("theory") + " vs " + QString::number(theory, 'f', 4)));
        QVERIFY(v.figure("theory").contains("k = 3.7"));
        // Speed-up 30 / 20 tok/s against the named plain request.
        QVERIFY2(v.figure("speedup").startsWith("1.50") && v.figure("speedup").contains("chat 1"),
                 qPrintable(v.figure("speedup")));
        QVERIFY(v.figure("counts").contains("2 bonus tokens"));
        // Integer k: the closed form equals the finite sum 1 + a + ... + a^k.
        QCOMPARE(DraftAcceptanceView::theoreticalTokensPerPass(0.5, 3), 1 + 0.5 + 0.25 + 0.125);
        QCOMPARE(DraftAcceptanceView::theoreticalTokensPerPass(1.0, 4), 5.0);
    }

    void speedupOnlyWithHonestBaseline() {
        DraftAcceptanceView v;
        SpecFrame f = frame();
        f.requests[1].decodeSolo = false;
        v.setFrame(f);
        QVERIFY2(v.figure("speedup").startsWith("–") && v.figure("speedup").contains("shared"),
                 qPrintable(v.figure("speedup")));
        f = frame();
        f.baselineTokPerS = 0;
        v.setFrame(f);
        QVERIFY2(v.figure("speedup").contains("no plain baseline"), qPrintable(v.figure("speedup")));
    }

    void selectionAndAppend() {
        DraftAcceptanceView v;
        SpecFrame f = frame();
        v.setFrame(f);
        v.setSelectedRequest(3);
        QCOMPARE(v.shownRequest(), qint64(3));
        QCOMPARE(v.histogramBars()->data()->at(1)->value, 1.0);
        v.setSelectedRequest(99);  // not in the frame: the newest
        QCOMPARE(v.shownRequest(), qint64(7));
        // A later frame with two more tokens appends them.
        f.requests[1].tokens.push_back({" two", TokenFate::Accepted, 1, 13});
        f.requests[1].tokens.push_back({" three", TokenFate::Corrected, 0, 13});
        v.setFrame(f);
        QCOMPARE(v.document()->toPlainText(), QString("Hello world!\u00B7x. Next line two three"));
        // No request at all: empty text, dashes.
        v.setFrame(SpecFrame{});
        QVERIFY(v.document()->isEmpty());
        QCOMPARE(v.figure("alpha"), QString("–"));
    }

    void readableInBothThemes() {
        for (const QPalette& pal : {QApplication::style()->standardPalette(), dark_palette()}) {
            const QColor text = pal.color(QPalette::Text);
            for (TokenFate f : {TokenFate::Accepted, TokenFate::Corrected, TokenFate::Bonus}) {
                const QTextCharFormat fmt = DraftAcceptanceView::fateFormat(f, pal);
                const double c = kvs::ui::contrastRatio(fmt.foreground().color(), fmt.background().color());
                QVERIFY2(c >= 4.5, qPrintable(QString("fate %1 contrast %2").arg(int(f)).arg(c)));
            }
            for (TokenFate f : {TokenFate::Rejected, TokenFate::Discarded, TokenFate::Plain}) {
                const QTextCharFormat fmt = DraftAcceptanceView::fateFormat(f, pal);
                const double c = kvs::ui::contrastRatio(fmt.foreground().color(), pal.color(QPalette::Base));
                QVERIFY2(c >= 3.0, qPrintable(QString("fate %1 contrast %2").arg(int(f)).arg(c)));
            }
            Q_UNUSED(text);
        }
        DraftAcceptanceView v;
        v.resize(900, 700);
        v.setPalette(dark_palette());
        v.show();
        v.setFrame(frame());
        const QColor bg = format_of(v.document(), "wor").background().color();
        QVERIFY2(bg.lightness() < 128, qPrintable(bg.name()));  // follows the dark theme
        QTest::qWait(100);
        QVERIFY(v.grab().save(QString::fromStdString(kvs::test::output_path("draft_acceptance_view_dark.png"))));
    }
};

QTEST_MAIN(TestDraftAcceptanceView)
#include "tst_draft_acceptance_view.moc"
