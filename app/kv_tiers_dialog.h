#pragma once
// KV tiers… (the Engine dock's button): the sizes of the CPU tier and of the disk store below
// the device KV pool, and the store's folder, for this window's engine (engine/kv_cache/
// kv_tiers.h; the CLI's --kv-cpu-mib / --kv-disk-mib / --kv-disk-dir). Kept in QSettings
// (kv_tiers/cpu_mib, kv_tiers/disk_mib, kv_tiers/disk_dir) and handed to the bridge, they
// apply when the engine starts again: the next model load or lesson, or "Save and restart the
// engine" (which drops the requests running now). The dialog says which tiers the running
// engine has. A disk folder that cannot be created or written is refused, naming it.
#include <QDialog>

#include "app/engine_bridge.h"

class QLabel;
class QLineEdit;
class QSpinBox;

namespace kvs::app {

class KvTiersDialog : public QDialog {
    Q_OBJECT
public:
    explicit KvTiersDialog(EngineBridge* bridge, QWidget* parent = nullptr);

    // What QSettings keeps (all off when nothing was saved), and saving it.
    static KvTierSettings saved();
    static void save(const KvTierSettings& t);

    // Checks the fields; saves them and hands them to the bridge; true when they were taken.
    // restart: the engine starts again now with them (its running requests are dropped).
    bool apply(bool restart);
    QString error() const;  // why the last apply() refused, shown in the dialog

private:
    void showRunning();
    EngineBridge* m_bridge;
    QSpinBox* m_cpu;
    QSpinBox* m_disk;
    QLineEdit* m_dir;
    QLabel* m_running;
    QLabel* m_error;
};

}  // namespace kvs::app
