// The application (tests/it/spark_e2e.rs): one job with a shuffle (reduceByKey) over
// 1..1000 keyed by x % 10. It knows nothing of the shuffle manager: it is compiled and
// jarred on its own and given to SparkSubmit as the application jar, never localized.
// Prints the shuffle manager Spark uses and the collected result, sorted by key.
package example;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

import org.apache.spark.SparkConf;
import org.apache.spark.SparkEnv;
import org.apache.spark.api.java.JavaSparkContext;
import scala.Tuple2;

public class ShuffleJob {
    public static void main(String[] args) {
        SparkConf conf = new SparkConf().setAppName("spark-localizer-e2e");
        try (JavaSparkContext sc = new JavaSparkContext(conf)) {
            System.out.println("[ShuffleJob] shuffle manager: " + SparkEnv.get().shuffleManager().getClass().getName());
            List<Integer> numbers = new ArrayList<>();
            for (int i = 1; i <= 1000; i++) {
                numbers.add(i);
            }
            List<Tuple2<Integer, Integer>> sums = sc.parallelize(numbers, 4)
                    .mapToPair(x -> new Tuple2<>(x % 10, x))
                    .reduceByKey(Integer::sum, 3)
                    .collect();
            Map<Integer, Integer> sorted = new TreeMap<>();
            for (Tuple2<Integer, Integer> t : sums) {
                sorted.put(t._1(), t._2());
            }
            System.out.println("[ShuffleJob] result: " + sorted);
        }
    }
}
