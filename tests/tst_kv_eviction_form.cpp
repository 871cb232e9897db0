// ctest-labels: ui
// The chat's KV eviction row in the Sampling dock (app/kv_eviction_form): a saved setting
// shows as its policy, budget and unit, and what the user picks is stored in the spelling
// the engine parses (parse_kv_eviction gives back the same policy and budget); off stores "".
#include <QComboBox>
#include <QSpinBox>
#include <QtTest>

#include "app/kv_eviction_form.h"
#include "app/sampling_form.h"
#include "engine/kv_cache/kv_eviction.h"

using namespace kvs;
using namespace kvs::app;

class TestKvEvictionForm : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void roundTrips_data() {
        QTest::addColumn<QString>("saved");
        QTest::addColumn<QString>("policyText");
        QTest::addColumn<int>("budget");
        QTest::addColumn<QString>("unit");
        QTest::newRow("h2o tokens") << "h2o:512"
                                    << "H2O" << 512 << "tokens";
        QTest::newRow("streaming fraction") << "streaming:0.25"
                                            << "StreamingLLM" << 25 << "fraction";
        QTest::newRow("snapkv whole context") << "snapkv:1.0"
                                              << "SnapKV" << 100 << "fraction";
        QTest::newRow("merge tokens") << "merge:64"
                                      << "Merge" << 64 << "tokens";
    }
    void roundTrips() {
        QFETCH(QString, saved);
        QFETCH(QString, policyText);
        QFETCH(int, budget);
        QFETCH(QString, unit);
        KvEvictionForm f;
        ChatSettings s;
        s.kvEviction = saved;
        f.load(s);
        auto* policy = f.findChild<QComboBox*>("kvEvictPolicy");
        auto* spin = f.findChild<QSpinBox*>("kvEvictBudget");
        auto* units = f.findChild<QComboBox*>("kvEvictUnit");
        QVERIFY(policy && spin && units);
        QCOMPARE(policy->currentText(), policyText);
        QCOMPARE(spin->value(), budget);
        QCOMPARE(units->currentData().toString(), unit);
        QVERIFY(spin->isEnabled());
        ChatSettings out;
        f.store(&out);
        auto a = parse_kv_eviction(out.kvEviction.toStdString());
        auto b = parse_kv_eviction(saved.toStdString());
        QVERIFY2(a.is_ok(), a.message().c_str());
        QCOMPARE(a->policy, b->policy);
        QCOMPARE(a->budget_tokens, b->budget_tokens);
        QCOMPARE(a->budget_fraction, b->budget_fraction);
    }
    void offStoresNothing() {
        SamplingForm form;  // the row sits in the Sampling dock
        auto* policy = form.findChild<QComboBox*>("kvEvictPolicy");
        QVERIFY(policy);
        ChatSettings s;
        s.kvEviction = "h2o:0.5";
        form.load(s);
        QCOMPARE(policy->currentData().toString(), QString("h2o"));
        policy->setCurrentIndex(policy->findData("none"));
        QVERIFY(!form.findChild<QSpinBox*>("kvEvictBudget")->isEnabled());
        ChatSettings out;
        out.kvEviction = "x";
        form.store(&out);
        QCOMPARE(out.kvEviction, QString());
        // A user's pick: H2O, 300 tokens.
        policy->setCurrentIndex(policy->findData("h2o"));
        auto* units = form.findChild<QComboBox*>("kvEvictUnit");
        units->setCurrentIndex(units->findData("tokens"));
        form.findChild<QSpinBox*>("kvEvictBudget")->setValue(300);
        form.store(&out);
        QCOMPARE(out.kvEviction, QString("h2o:300"));
    }
};

QTEST_MAIN(TestKvEvictionForm)
#include "tst_kv_eviction_form.moc"
