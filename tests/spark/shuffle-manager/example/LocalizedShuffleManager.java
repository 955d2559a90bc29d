// The class only the localized jar provides (tests/it/spark_e2e.rs): Spark's sort-based
// shuffle, unchanged, announcing on stdout that it was constructed (and from which jar)
// and each time Spark obtains a shuffle writer or reader from it. Set as
// spark.shuffle.manager, it is instantiated by SparkEnv while the SparkContext starts, so
// it must be on the JVM's classpath from the first instruction: a jar added later with
// --jars or spark.jars would come too late.
//
// Compiled against $SPARK_HOME/jars/* of Spark 3.5 (SortShuffleManager(SparkConf)).
package example;

import org.apache.spark.SparkConf;
import org.apache.spark.TaskContext;
import org.apache.spark.shuffle.ShuffleHandle;
import org.apache.spark.shuffle.ShuffleReadMetricsReporter;
import org.apache.spark.shuffle.ShuffleReader;
import org.apache.spark.shuffle.ShuffleWriteMetricsReporter;
import org.apache.spark.shuffle.ShuffleWriter;
import org.apache.spark.shuffle.sort.SortShuffleManager;

public class LocalizedShuffleManager extends SortShuffleManager {
    public static final String MARKER = "[LocalizedShuffleManager]";

    public LocalizedShuffleManager(SparkConf conf) {
        super(conf);
        mark("constructed from " + LocalizedShuffleManager.class.getProtectionDomain().getCodeSource().getLocation());
    }

    @Override
    public <K, V> ShuffleWriter<K, V> getWriter(
            ShuffleHandle handle, long mapId, TaskContext context, ShuffleWriteMetricsReporter metrics) {
        mark("writer for shuffle " + handle.shuffleId() + " map " + mapId);
        return super.getWriter(handle, mapId, context, metrics);
    }

    @Override
    public <K, C> ShuffleReader<K, C> getReader(
            ShuffleHandle handle, int startMapIndex, int endMapIndex, int startPartition, int endPartition,
            TaskContext context, ShuffleReadMetricsReporter metrics) {
        mark("reader for shuffle " + handle.shuffleId() + " partitions " + startPartition + "-" + endPartition);
        return super.getReader(handle, startMapIndex, endMapIndex, startPartition, endPartition, context, metrics);
    }

    private static void mark(String what) {
        System.out.println(MARKER + " " + what);
        System.out.flush();
    }
}
