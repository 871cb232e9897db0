#include "app/kv_tiers_dialog.h"

#include <QDialogButtonBox>
#include <QDir>
#include <QFileDialog>
#include <QFileInfo>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QSettings>
#include <QSpinBox>
#include <QTemporaryFile>
#include <QVBoxLayout>
#include <algorithm>

namespace kvs::app {

namespace {
QString describe(const KvTierSettings& t) {
    if (!t.enabled()) return KvTiersDialog::tr("no KV tiers (the device pool only)");
    QStringList parts;
    parts << (t.cpuMiB > 0 ? KvTiersDialog::tr("CPU tier %1 MiB").arg(t.cpuMiB) : KvTiersDialog::tr("no CPU tier"));
    if (t.diskMiB > 0)
        parts << KvTiersDialog::tr("disk store %1 MiB in %2")
                     .arg(t.diskMiB)
                     .arg(t.diskDir.isEmpty() ? KvTiersDialog::tr("the default folder") : t.diskDir);
    else
        parts << KvTiersDialog::tr("no disk store");
    return parts.join(QStringLiteral(", "));
}
}  // namespace

KvTierSettings KvTiersDialog::saved() {
    QSettings s;
    KvTierSettings t;
    t.cpuMiB = std::max<qint64>(0, s.value("kv_tiers/cpu_mib", 0).toLongLong());
    t.diskMiB = std::max<qint64>(0, s.value("kv_tiers/disk_mib", 0).toLongLong());
    t.diskDir = s.value("kv_tiers/disk_dir").toString();
    return t;
}

void KvTiersDialog::save(const KvTierSettings& t) {
    QSettings s;
    s.setValue("kv_tiers/cpu_mib", t.cpuMiB);
    s.setValue("kv_tiers/disk_mib", t.diskMiB);
    s.setValue("kv_tiers/disk_dir", t.diskDir);
}

KvTiersDialog::KvTiersDialog(EngineBridge* bridge, QWidget* parent) : QDialog(parent), m_bridge(bridge) {
    setWindowTitle(tr("KV tiers"));
    setObjectName("kvTiersDialog");
    const KvTierSettings t = bridge->kvTiers();
    m_cpu = new QSpinBox(this);
    m_cpu->setObjectName("kvCpuMiB");
    m_cpu->setRange(0, 1 << 20);
    m_cpu->setSuffix(tr(" MiB"));
    m_cpu->setSpecialValueText(tr("off"));
    m_cpu->setValue(static_cast<int>(std::min<qint64>(t.cpuMiB, 1 << 20)));
    m_cpu->setToolTip(
        tr("Prefix-cached KV blocks the device pool evicts are kept here in CPU memory and come back "
           "on a prefix hit (kvscope --kv-cpu-mib)"));
    m_disk = new QSpinBox(this);
    m_disk->setObjectName("kvDiskMiB");
    m_disk->setRange(0, 1 << 24);
    m_disk->setSuffix(tr(" MiB"));
    m_disk->setSpecialValueText(tr("off"));
    m_disk->setValue(static_cast<int>(std::min<qint64>(t.diskMiB, 1 << 24)));
    m_disk->setToolTip(
        tr("Blocks the CPU tier evicts go to files on disk (checksummed, least recently used removed "
           "beyond this size) and survive a restart of the program (kvscope --kv-disk-mib)"));
    m_dir = new QLineEdit(t.diskDir, this);
    m_dir->setObjectName("kvDiskDir");
    m_dir->setPlaceholderText(tr("default: ~/.cache/kvscope/kv"));
    auto* browse = new QPushButton(tr("Browse…"), this);
    connect(browse, &QPushButton::clicked, this, [this] {
        const QString d = QFileDialog::getExistingDirectory(this, tr("Folder of the KV disk store"), m_dir->text());
        if (!d.isEmpty()) m_dir->setText(d);
    });
    auto* dirRow = new QHBoxLayout;
    dirRow->addWidget(m_dir, 1);
    dirRow->addWidget(browse);
    auto* form = new QFormLayout;
    form->addRow(tr("CPU tier"), m_cpu);
    form->addRow(tr("Disk store"), m_disk);
    form->addRow(tr("Disk folder"), dirRow);
    auto* note = new QLabel(tr("These apply when the engine starts again: the next model load or lesson, or "
                               "<b>Save and restart the engine</b> (the requests running now are dropped). "
                               "Engines with prefix caching off (some lessons) run without tiers."),
                            this);
    note->setObjectName("kvTiersNote");
    note->setWordWrap(true);
    m_running = new QLabel(this);
    m_running->setObjectName("kvTiersRunning");
    m_running->setWordWrap(true);
    m_error = new QLabel(this);
    m_error->setObjectName("kvTiersError");
    m_error->setWordWrap(true);
    m_error->setStyleSheet("color: #c0392b");
    m_error->hide();
    auto* buttons = new QDialogButtonBox(QDialogButtonBox::Save | QDialogButtonBox::Cancel, this);
    auto* restart = buttons->addButton(tr("Save and restart the engine"), QDialogButtonBox::ApplyRole);
    restart->setObjectName("kvTiersRestart");
    buttons->button(QDialogButtonBox::Save)->setObjectName("kvTiersSave");
    connect(buttons, &QDialogButtonBox::accepted, this, [this] {
        if (apply(false)) accept();
    });
    connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
    connect(restart, &QPushButton::clicked, this, [this] {
        if (apply(true)) accept();
    });
    auto* lay = new QVBoxLayout(this);
    lay->addLayout(form);
    lay->addWidget(note);
    lay->addWidget(m_running);
    lay->addWidget(m_error);
    lay->addWidget(buttons);
    showRunning();
}

void KvTiersDialog::showRunning() {
    m_running->setText(tr("The engine now runs with: %1.").arg(describe(m_bridge->runningKvTiers())));
}

QString KvTiersDialog::error() const { return m_error->text(); }

bool KvTiersDialog::apply(bool restart) {
    KvTierSettings t;
    t.cpuMiB = m_cpu->value();
    t.diskMiB = m_disk->value();
    t.diskDir = m_dir->text().trimmed();
    if (t.diskMiB > 0 && !t.diskDir.isEmpty()) {  // the store writes there: it must be a folder we can write
        const QFileInfo fi(t.diskDir);
        QTemporaryFile probe(QDir(t.diskDir).filePath(QStringLiteral(".kvscope-probe-XXXXXX")));
        if (fi.isRelative()) {
            m_error->setText(tr("The disk folder must be an absolute path, got '%1'").arg(t.diskDir));
        } else if (!QDir().mkpath(t.diskDir) || !QFileInfo(t.diskDir).isDir() || !probe.open()) {
            m_error->setText(tr("The disk folder '%1' cannot be created or written").arg(t.diskDir));
        } else {
            m_error->clear();
        }
        if (!m_error->text().isEmpty()) {
            m_error->show();
            return false;
        }
    }
    m_error->clear();
    m_error->hide();
    save(t);
    m_bridge->setKvTiers(t);
    if (restart) {
        EngineBridge* bridge = m_bridge;  // configureEngine runs on the bridge's thread
        QMetaObject::invokeMethod(
            bridge, [bridge] { bridge->configureEngine(bridge->engineSettings()); }, Qt::QueuedConnection);
    }
    return true;
}

}  // namespace kvs::app
