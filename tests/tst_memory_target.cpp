// ctest-labels: ui
// Where the model manager says a model's weights and KV cache go (Session::compute_memory,
// kernels/backend.h cuda_device_memory, ui/memory_sizing memoryTargetText): the GPU's VRAM
// (its name, free and total bytes from libkvscope_cuda.so) when the CUDA backend loads, this
// machine's RAM otherwise, with the reason CUDA is not used. On a machine without the CUDA
// library or a GPU the CPU path is checked against /proc/meminfo's MemTotal and the
// reason make_cuda_backend gives; on a GPU machine the device's numbers are checked for
// sense. The sentences' formatting is checked for both.
#include <QFile>
#include <QtTest>

#include "engine/runtime/session.h"
#include "kernels/backend.h"
#include "ui/memory_sizing.h"

using kvs::ui::MemorySizing;

namespace {

// MemTotal of /proc/meminfo in bytes (0 when unreadable): the independent reading of the RAM.
qint64 meminfo_total() {
    QFile f("/proc/meminfo");
    if (!f.open(QIODevice::ReadOnly)) return 0;
    for (const QByteArray& line : f.readAll().split('\n'))
        if (line.startsWith("MemTotal:")) {
            const QList<QByteArray> parts = line.simplified().split(' ');
            return parts.size() >= 2 ? parts[1].toLongLong() * 1024 : 0;
        }
    return 0;
}

}  // namespace

class TstMemoryTarget : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void formatting() {
        const qint64 gib = qint64(1) << 30;
        QCOMPARE(MemorySizing::memoryTargetText(false, {}, 24 * gib, 24 * gib), QString("CPU RAM (24 GiB)"));
        QCOMPARE(MemorySizing::memoryTargetText(false, {}, 0, 0), QString("CPU RAM (size unknown)"));
        QCOMPARE(MemorySizing::memoryTargetText(true, "NVIDIA H100 80GB HBM3", 70 * gib, 80 * gib),
                 QString("GPU VRAM (NVIDIA H100 80GB HBM3: %1 free of %2)")
                     .arg(MemorySizing::formatBytes(70 * gib), MemorySizing::formatBytes(80 * gib)));
        QVERIFY(MemorySizing::memoryTargetText(true, {}, gib, 2 * gib).startsWith("GPU VRAM (CUDA device 0: "));
    }

    void computeMemoryNamesTheDevice() {
        const kvs::Session::ComputeMemory m = kvs::Session::compute_memory();
        const kvs::DeviceMemory d = kvs::cuda_device_memory();
        QCOMPARE(m.gpu, d.ok);
        if (!m.gpu) {  // the CPU path: RAM, and why CUDA is not used (the backend factory's words)
            QCOMPARE(m.total_bytes, kvs::Session::machine_ram_bytes());
            QCOMPARE(m.free_bytes, m.total_bytes);
            const qint64 meminfo = meminfo_total();
            if (meminfo > 0) QCOMPARE(m.total_bytes, meminfo);
            std::string why;
            QVERIFY(kvs::make_cuda_backend(&why) == nullptr);
            QCOMPARE(m.note, why);
            QVERIFY(!m.note.empty());
            const QString text = MemorySizing::memoryTargetText(false, {}, m.free_bytes, m.total_bytes);
            QVERIFY2(text.startsWith("CPU RAM ("), qPrintable(text));
            qInfo("CPU path: %s; CUDA not used: %s", qPrintable(text), m.note.c_str());
        } else {  // a GPU machine: its numbers make sense
            QVERIFY(!m.device.empty());
            QVERIFY(m.total_bytes > 0 && m.free_bytes > 0 && m.free_bytes <= m.total_bytes);
            qInfo("GPU path: %s", qPrintable(MemorySizing::memoryTargetText(true, QString::fromStdString(m.device),
                                                                            m.free_bytes, m.total_bytes)));
        }
    }
};

QTEST_MAIN(TstMemoryTarget)
#include "tst_memory_target.moc"
