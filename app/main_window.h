#pragma once
// The main window: saved conversations in a side list, one chat view per conversation
// (several can generate at once: they are separate requests of the one engine), the
// chat's sampling settings, and dock widgets for the engine's internals: lesson controls
// and the request table (the block map, slot timeline and metrics views dock here too).
// The engine runs behind app/engine_bridge; the window polls its newest snapshot on a
// timer and never waits on it.
#include <QHash>
#include <QList>
#include <QMainWindow>
#include <QThread>
#include <QElapsedTimer>
#include <QTimer>

#include "app/chat_store.h"
#include "app/engine_bridge.h"
#include "ui/view_types.h"

class QLabel;
class QProgressBar;
class QLineEdit;
class QListWidget;
class QStackedWidget;
class QTableWidget;
class QDoubleSpinBox;
class QSpinBox;
class QPlainTextEdit;
class QPushButton;
class QDockWidget;
namespace kvs::ui {
class ChatView;
class KvBlockMapView;
class SlotTimelineView;
class MetricsView;
class MemoryPlannerView;
class DraftAcceptanceView;
class QuantCompareView;
}

namespace kvs::app {

class SpeculativeForm;
class QuantCompareDock;

class MainWindow : public QMainWindow {
    Q_OBJECT
public:
    // chatsPath: where conversations are saved (default: ChatStore::defaultPath()).
    explicit MainWindow(const QString& modelNameOrPath, QWidget* parent = nullptr, const QString& chatsPath = {});
    ~MainWindow() override;
    ui::ChatView* chatView() const;  // the current conversation's view
    EngineBridge* bridge() const { return m_bridge; }
    const ChatStore& store() const { return m_store; }
    int conversationCount() const { return m_store.conversations().size(); }
    // The latest frame the views got (for tests and the status bar).
    const ui::EngineFrame& lastFrame() const { return m_frame; }
    // How long the GUI thread spent in the last / the slowest snapshot poll (convert +
    // update every view), in ms: the frame-time figures of the issue.
    double lastPollMs() const { return m_lastPollMs; }
    double maxPollMs() const { return m_maxPollMs; }
    // File ▸ Export: a view as PNG, the engine's recent steps and newest snapshot as a
    // trace (the format of `kvscope bench --trace`).
    bool exportPng(QWidget* w, const QString& path) const;
    bool exportTrace(const QString& path, QString* error) const;
    // View ▸ Theme: "system" (the platform's palette), "light" or "dark"; remembered.
    void setTheme(const QString& theme);
    // The model the window opened last (File ▸ Open model), if any.
    static QString lastModel();
    // Plays a built-in lesson (resources/lessons): a fresh engine with its settings,
    // paused; its events inject requests and show captions as the steps go by.
    bool playLesson(const QString& name, QString* error);
    QString lessonCaption() const;
    // Lesson mode: inject n synthetic requests (see EngineBridge::injectSynthetic).
    void injectRequests(int n, int promptLen, int outputLen, int priority, int sharedPrefix = 0,
                        const QString& speculative = {}, int specK = 4);
    // Speculative decoding: the Draft acceptance dock (follows the chat's last speculative reply).
    ui::DraftAcceptanceView* draftView() const { return m_draftView; }
    // The Quantization compare dock: a reference and a quantized variant side by side.
    ui::QuantCompareView* quantView() const { return m_quantView; }
    QuantCompareDock* quantDock() const { return m_quantDock; }

public Q_SLOTS:
    void newChat();
    void renameChat(const QString& title);
    void deleteChat();
    void selectChat(int row);

protected:
    void closeEvent(QCloseEvent* e) override;

private:
    void saveLayout() const;
    struct Live {              // a conversation's reply in flight
        qint64 requestId = 0;
        QString pending;
    };
    ui::ChatView* viewFor(const QString& convId);
    void onSend(const QString& convId, const QString& text);
    void onStop(const QString& convId);
    void replay(const QString& convId, ui::ChatView* v);
    void retry(const QString& convId, bool edit);
    void refreshList();
    void saveStore();
    void loadSettingsIntoForm();
    void storeFormSettings();
    void poll();
    void finishPoll(const QElapsedTimer& timer);  // status bar figures and poll timing
    void pollSpec();  // the draft acceptance view, at most 5 times a second
    void openModel();
    void loadModelPath(const QString& path);
    QDockWidget* addDock(const QString& title, const QString& name, QWidget* w, Qt::DockWidgetArea area);
    QWidget* buildSettingsForm();
    QWidget* buildEnginePanel();

    ChatStore m_store;
    QString m_currentId;
    QHash<QString, ui::ChatView*> m_views;   // conversation id -> its view
    QHash<QString, Live> m_live;             // conversation id -> reply in flight
    QHash<qint64, QString> m_requestConv;    // request id -> conversation id (while in flight)
    QHash<qint64, QString> m_requestLabel;   // request id -> chat title, for the views
    QStackedWidget* m_stack;
    QListWidget* m_list;
    QLineEdit* m_search;
    QLabel* m_modelLabel;
    QLabel* m_liveLabel;
    QProgressBar* m_loadProgress;
    bool m_ready = false;
    QString m_notReadyWhy;
    // sampling form
    QDoubleSpinBox* m_temp;
    QSpinBox* m_topK;
    QDoubleSpinBox* m_topP;
    QDoubleSpinBox* m_minP;
    QDoubleSpinBox* m_repeat;
    QSpinBox* m_maxTokens;
    QSpinBox* m_seed;
    QPlainTextEdit* m_system;
    SpeculativeForm* m_specForm;
    // engine panel
    QTableWidget* m_requests;
    ui::KvBlockMapView* m_blockMap;
    ui::SlotTimelineView* m_timeline;
    ui::MetricsView* m_metrics;
    ui::MemoryPlannerView* m_planner;
    ui::DraftAcceptanceView* m_draftView;
    ui::QuantCompareView* m_quantView;
    QuantCompareDock* m_quantDock = nullptr;  // its worker thread; made once the bridge exists
    qint64 m_specStep = -1;          // the spec snapshot the draft view shows
    QElapsedTimer m_specClock;
    QPushButton* m_pauseButton;
    QTimer m_pollTimer;
    ui::EngineFrame m_frame;
    std::shared_ptr<const EngineSnapshot> m_snap;  // the newest, for block text on hover
    qint64 m_lastStep = -1;
    double m_lastPollMs = 0, m_maxPollMs = 0;
    QElapsedTimer m_tableClock;
    quint64 m_injectSeed = 1;
    QString m_loadingModel;
    // The lesson being played: its events from m_lessonNext on are still to come.
    Lesson m_lesson;
    int m_lessonNext = -1;   // -1: no lesson
    bool m_lessonStarted = false;
    QLabel* m_caption;
    qint64 m_lessonIdleAt = -1;  // the step after which lessonIdleAdvance() last ran events
    void lessonIdleAdvance();
    void runLessonEvents(qint64 step);  // a model chosen with File ▸ Open model, remembered once loaded

    QThread m_engineThread;
    EngineBridge* m_bridge;  // lives on m_engineThread
};

}  // namespace kvs::app
