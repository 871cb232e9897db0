// ctest-labels: ui bench
// GUI-thread time per streamed token in the chat view (ui/chat_view, ui/chat_transcript) at
// turn 1 and at turn 200 of a 200-exchange chat of 50,000 tokens. A "token" is a piece of 4
// characters of a Markdown reply (paragraphs, a list, a code block, a table in each reply of
// 250 pieces), handed to ChatView::appendAssistantText as the chat controller does; the time
// per piece covers the append and the events it posts, the transcript's paint of what changed
// included (QCoreApplication::processEvents; the paints are counted), offscreen at 1600x1000.
// KVS_BENCH_RUNS runs (default 3).
// The same is measured for the transcript re-rendered whole per token (the chat view before
// issue 21: all turns to HTML, QTextBrowser::setHtml) as the baseline, on fewer tokens.
// Also: saving the 200-exchange chat (ChatStore::save, what the controller does at most every
// 500 ms while a reply streams) and, with the default model installed, counting its tokens
// (EngineBridge::countContext, what the gauge does when a reply ends).
// Prints a table and writes tests/output/bench_chat_stream.json; fails only when a step does.
#include <QApplication>
#include <QElapsedTimer>
#include <QFile>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QScrollBar>
#include <QTemporaryDir>
#include <QTextBrowser>
#include <QtTest>
#include <algorithm>
#include <cstdio>

#include "app/chat_store.h"
#include "app/engine_bridge.h"
#include "tests/support/test_paths.h"
#include "ui/chat_view.h"

namespace {

struct PaintCounter : QObject {
    int paints = 0;
    bool eventFilter(QObject*, QEvent* e) override {
        if (e->type() == QEvent::Paint) ++paints;
        return false;
    }
};
int g_paints = 0;  // paints of the transcript during the last streamInto / streamOld

constexpr int kExchanges = 200;
constexpr int kPiecesPerReply = 250;
constexpr int kPieceChars = 4;

// A Markdown reply of exactly kPiecesPerReply * kPieceChars characters, different per turn.
QString reply(int turn) {
    QString s = QString(
                    "## Step %1: paging the cache\n\nThe engine keeps keys and values in blocks of 16 tokens, "
                    "so a sequence of %2 tokens holds %3 blocks.\n\n- blocks are shared by prefix\n- freed at "
                    "the end\n- copied on write\n\n```python\ndef blocks(n, size=16):\n    return (n + size - 1) "
                    "// size\n```\n\n| tokens | blocks |\n| --- | --- |\n| %2 | %3 |\n\n")
                    .arg(turn)
                    .arg(turn * 7 + 5)
                    .arg((turn * 7 + 5 + 15) / 16);
    const QString filler = "Decode reads every cached block once per token, which is why it is memory bound. ";
    while (s.size() < kPiecesPerReply * kPieceChars) s += filler;
    return s.left(kPiecesPerReply * kPieceChars);
}

struct Stats {
    double p50 = 0, p90 = 0, p99 = 0, max = 0, mean = 0;  // microseconds
};

Stats stats(std::vector<double> us) {
    std::sort(us.begin(), us.end());
    auto q = [&](double f) { return us[std::min(us.size() - 1, size_t(f * double(us.size() - 1) + 0.5))]; };
    Stats s;
    s.p50 = q(0.5);
    s.p90 = q(0.9);
    s.p99 = q(0.99);
    s.max = us.back();
    double sum = 0;
    for (double v : us) sum += v;
    s.mean = sum / double(us.size());
    return s;
}

// Streams one reply into the view (after `before` finished exchanges), timing each piece.
std::vector<double> streamInto(kvs::ui::ChatView& v, QTextBrowser* t, int turn) {
    v.appendUserMessage(QString("Question %1: how does paging work?").arg(turn));
    v.beginAssistantMessage();
    const QString text = reply(turn);
    std::vector<double> us;
    QElapsedTimer clock;
    PaintCounter pc;
    t->viewport()->installEventFilter(&pc);
    for (int p = 0; p < kPiecesPerReply; ++p) {
        clock.start();
        v.appendAssistantText(text.mid(p * kPieceChars, kPieceChars));
        QCoreApplication::processEvents();
        us.push_back(double(clock.nsecsElapsed()) / 1000.0);
    }
    v.endAssistantMessage("250 tokens · 30 tok/s");
    t->viewport()->removeEventFilter(&pc);
    g_paints = pc.paints;
    return us;
}

// The transcript before issue 21: every turn to HTML, the whole document replaced per token.
QString oldHtml(const QList<QPair<QString, QString>>& turns) {
    QString html;
    for (const auto& [role, text] : turns) {
        const QString body = text.toHtmlEscaped().replace("\n", "<br>");
        html += QString("<p style='margin:8px 0'><b>%1</b><br>%2</p>").arg(role, body);
    }
    return html;
}

std::vector<double> streamOld(QTextBrowser* t, QList<QPair<QString, QString>> turns, int turn, int pieces) {
    turns.append(QPair<QString, QString>{"You", QString("Question %1: how does paging work?").arg(turn)});
    turns.append(QPair<QString, QString>{"Assistant", QString()});
    const QString text = reply(turn);
    std::vector<double> us;
    QElapsedTimer clock;
    PaintCounter pc;
    t->viewport()->installEventFilter(&pc);
    for (int p = 0; p < pieces; ++p) {
        clock.start();
        turns.last().second += text.mid(p * kPieceChars, kPieceChars);
        auto* sb = t->verticalScrollBar();
        t->setHtml(oldHtml(turns));
        sb->setValue(sb->maximum());
        QCoreApplication::processEvents();
        us.push_back(double(clock.nsecsElapsed()) / 1000.0);
    }
    t->viewport()->removeEventFilter(&pc);
    g_paints = pc.paints;
    return us;
}

QJsonObject json(const Stats& s) {
    return {{"p50_us", s.p50}, {"p90_us", s.p90}, {"p99_us", s.p99}, {"max_us", s.max}, {"mean_us", s.mean}};
}

}  // namespace

class BenchChatStream : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void perTokenAtTurn1AndTurn200() {
        const int runs = std::max(
            1, qEnvironmentVariableIntValue("KVS_BENCH_RUNS") ? qEnvironmentVariableIntValue("KVS_BENCH_RUNS") : 3);
        const int oldPieces = 20;
        QJsonArray runsJson;
        std::vector<Stats> first, last, oldFirst, oldLast;
        int paints1 = 0, paints200 = 0, hidden = 0;
        for (int r = 0; r < runs; ++r) {
            {  // turn 1: an empty chat
                kvs::ui::ChatView v;
                v.resize(1600, 1000);
                v.show();
                QVERIFY(QTest::qWaitForWindowExposed(&v));
                first.push_back(stats(streamInto(v, v.findChild<QTextBrowser*>("chatTranscript"), 1)));
                paints1 = g_paints;
            }
            {  // turn 200: 199 finished exchanges shown first (as a chat is replayed when opened)
                kvs::ui::ChatView v;
                v.resize(1600, 1000);
                v.show();
                QVERIFY(QTest::qWaitForWindowExposed(&v));
                for (int turn = 1; turn < kExchanges; ++turn) {
                    v.appendUserMessage(QString("Question %1: how does paging work?").arg(turn));
                    v.appendAssistantMessage(reply(turn), "250 tokens · 30 tok/s");
                }
                QCoreApplication::processEvents();
                last.push_back(stats(streamInto(v, v.findChild<QTextBrowser*>("chatTranscript"), kExchanges)));
                paints200 = g_paints;
                hidden = v.hiddenTurns();
                QVERIFY(v.transcriptText().contains(QString("Question %1:").arg(kExchanges)));
            }
            {  // the baseline: the whole transcript re-rendered per token
                QTextBrowser t;
                t.resize(1600, 900);
                t.show();
                QVERIFY(QTest::qWaitForWindowExposed(&t));
                oldFirst.push_back(stats(streamOld(&t, {}, 1, oldPieces)));
                QList<QPair<QString, QString>> turns;
                for (int turn = 1; turn < kExchanges; ++turn)
                    turns << QPair<QString, QString>{"You", QString("Question %1: how does paging work?").arg(turn)}
                          << QPair<QString, QString>{"Assistant", reply(turn)};
                oldLast.push_back(stats(streamOld(&t, turns, kExchanges, oldPieces)));
            }
            runsJson.append(QJsonObject{{"paints_turn1", paints1},
                                        {"paints_turn200", paints200},
                                        {"turn1", json(first.back())},
                                        {"turn200", json(last.back())},
                                        {"rerender_turn1", json(oldFirst.back())},
                                        {"rerender_turn200", json(oldLast.back())}});
        }
        auto row = [](const char* name, const std::vector<Stats>& s, double Stats::*f) {
            double lo = 1e300, hi = 0;
            std::vector<double> v;
            for (const Stats& x : s) lo = std::min(lo, x.*f), hi = std::max(hi, x.*f), v.push_back(x.*f);
            std::sort(v.begin(), v.end());
            std::printf("  %-34s median %9.1f us   (runs %9.1f .. %9.1f)\n", name, v[v.size() / 2], lo, hi);
            return v[v.size() / 2];
        };
        std::printf("\nGUI-thread time per streamed token (%d runs; %d tokens per reply, %d exchanges = %d tokens)\n",
                    runs, kPiecesPerReply, kExchanges, kExchanges * kPiecesPerReply);
        std::printf(
            "  transcript paints while streaming 250 tokens: turn 1 %d, turn 200 %d (%d earlier turns not shown)\n",
            paints1, paints200, hidden);
        const double a50 = row("append, turn 1, p50", first, &Stats::p50);
        row("append, turn 1, p99", first, &Stats::p99);
        row("append, turn 1, mean", first, &Stats::mean);
        const double b50 = row("append, turn 200, p50", last, &Stats::p50);
        row("append, turn 200, p99", last, &Stats::p99);
        row("append, turn 200, mean", last, &Stats::mean);
        const double c50 = row("re-render whole, turn 1, p50", oldFirst, &Stats::p50);
        const double d50 = row("re-render whole, turn 200, p50", oldLast, &Stats::p50);
        std::printf("  turn 200 / turn 1 (p50): append %.2f, re-render whole %.1f\n", b50 / a50, d50 / c50);
        std::printf("  re-render whole / append at turn 200 (p50): %.0f\n", d50 / b50);

        // Saving the long chat, as the controller does while a reply streams.
        QTemporaryDir dir;
        kvs::app::ChatStore store(dir.filePath("chats.json"));
        kvs::app::Conversation& c = store.add("Long chat");
        for (int turn = 1; turn <= kExchanges; ++turn) {
            kvs::app::SavedTurn u, a;
            u.role = "user";
            u.content = QString("Question %1: how does paging work?").arg(turn);
            a.role = "assistant";
            a.content = reply(turn);
            a.summary = "250 tokens · 30 tok/s";
            c.turns << u << a;
        }
        std::vector<double> saveMs;
        for (int r = 0; r < runs; ++r) {
            QElapsedTimer clock;
            clock.start();
            QString err;
            QVERIFY2(store.save(&err), qPrintable(err));
            saveMs.push_back(double(clock.nsecsElapsed()) / 1e6);
        }
        std::sort(saveMs.begin(), saveMs.end());
        std::printf("  save the 200-exchange chat: median %.1f ms (runs %.1f .. %.1f), %lld bytes\n",
                    saveMs[saveMs.size() / 2], saveMs.front(), saveMs.back(),
                    static_cast<long long>(QFileInfo(store.path()).size()));
        QJsonObject out{{"runs", runsJson},
                        {"exchanges", kExchanges},
                        {"tokens_per_reply", kPiecesPerReply},
                        {"save_ms", QJsonArray({saveMs.front(), saveMs[saveMs.size() / 2], saveMs.back()})}};

        // Counting the long chat's tokens with the default model (the gauge, once a reply ends).
        const std::string model = kvs::test::default_model_path();
        if (!model.empty()) {
            kvs::app::EngineBridge bridge;
            bridge.loadModel(QString::fromStdString(model));
            std::vector<double> countMs;
            int used = 0;
            for (int r = 0; r < runs; ++r) {
                QElapsedTimer clock;
                clock.start();
                used = bridge.countContext(c.messages(), c.settings).used;
                countMs.push_back(double(clock.nsecsElapsed()) / 1e6);
            }
            std::sort(countMs.begin(), countMs.end());
            std::printf("  count its tokens (SmolLM2): %d tokens, median %.1f ms (runs %.1f .. %.1f)\n", used,
                        countMs[countMs.size() / 2], countMs.front(), countMs.back());
            out.insert("count_tokens", used);
            out.insert("count_ms", QJsonArray({countMs.front(), countMs[countMs.size() / 2], countMs.back()}));
        }
        QFile f(QString::fromStdString(kvs::test::output_path("bench_chat_stream.json")));
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write(QJsonDocument(out).toJson());
    }
};

QTEST_MAIN(BenchChatStream)
#include "bench_chat_stream.moc"
