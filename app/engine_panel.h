#pragma once
// The Engine dock: Pause / Step / slow motion of the engine loop, the caption of the
// lesson being played and its End lesson button, synthetic load (Inject), and the table of
// unfinished requests.
#include <QElapsedTimer>
#include <QTimer>
#include <QVector>
#include <QWidget>

#include "ui/view_types.h"

class QLabel;
class QPushButton;
class QTableWidget;

namespace kvs::app {

class EngineBridge;

class EnginePanel : public QWidget {
    Q_OBJECT
public:
    explicit EnginePanel(EngineBridge* bridge, QWidget* parent = nullptr);
    void setPaused(bool paused);           // as if Pause / Resume were pressed
    void setCaption(const QString& html);  // the lesson's caption; empty hides it
    void setLessonActive(bool active);     // shows End lesson while a lesson plays
    // The frame's unfinished requests; the table is redrawn at most 5 times a second (the
    // newest rows always get there: a redraw held back runs once the 200 ms are up).
    void showRequests(const QVector<ui::RequestRow>& requests);

Q_SIGNALS:
    void injectRequested(int n, int promptLen, int outputLen, int priority);
    void endLessonRequested();

private:
    QWidget* buildInjectRow();
    void buildRequestTable();
    void redrawTable();

    EngineBridge* m_bridge;
    QPushButton* m_pauseButton;
    QLabel* m_caption;
    QPushButton* m_endLesson;
    QTableWidget* m_requests;
    QVector<ui::RequestRow> m_rows;  // the newest frame's
    QElapsedTimer m_tableClock;      // since the last redraw
    QTimer m_tableTimer;             // a held-back redraw
};

}  // namespace kvs::app
