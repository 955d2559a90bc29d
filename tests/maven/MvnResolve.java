import java.util.List;
import org.apache.maven.repository.internal.MavenRepositorySystemUtils;
import org.eclipse.aether.DefaultRepositorySystemSession;
import org.eclipse.aether.RepositorySystem;
import org.eclipse.aether.artifact.Artifact;
import org.eclipse.aether.artifact.DefaultArtifact;
import org.eclipse.aether.collection.CollectRequest;
import org.eclipse.aether.connector.basic.BasicRepositoryConnectorFactory;
import org.eclipse.aether.graph.Dependency;
import org.eclipse.aether.graph.DependencyNode;
import org.eclipse.aether.impl.DefaultServiceLocator;
import org.eclipse.aether.internal.impl.SimpleLocalRepositoryManagerFactory;
import org.eclipse.aether.repository.LocalRepository;
import org.eclipse.aether.spi.connector.RepositoryConnectorFactory;
import org.eclipse.aether.util.graph.visitor.PreorderNodeListGenerator;

/** What Maven (its resolver, with Maven's default session) resolves for a coordinate
 *  from a local repository directory: one Spark-style jar name per line. */
public class MvnResolve {
    public static void main(String[] args) throws Exception {
        DefaultServiceLocator locator = MavenRepositorySystemUtils.newServiceLocator();
        locator.addService(RepositoryConnectorFactory.class, BasicRepositoryConnectorFactory.class);
        RepositorySystem system = locator.getService(RepositorySystem.class);
        DefaultRepositorySystemSession session = MavenRepositorySystemUtils.newSession();
        session.setLocalRepositoryManager(
            new SimpleLocalRepositoryManagerFactory().newInstance(session, new LocalRepository(args[0])));
        session.setOffline(true);
        CollectRequest request = new CollectRequest();
        request.setRootArtifact(new DefaultArtifact("spark-localizer:differential:1"));
        request.addDependency(new Dependency(new DefaultArtifact(args[1]), "compile"));
        DependencyNode root = system.collectDependencies(session, request).getRoot();
        PreorderNodeListGenerator nodes = new PreorderNodeListGenerator();
        root.accept(nodes);
        for (Artifact a : nodes.getArtifacts(true)) {
            if (!"jar".equals(a.getExtension())) continue;
            String c = a.getClassifier().isEmpty() ? "" : "-" + a.getClassifier();
            System.out.println(a.getGroupId() + "_" + a.getArtifactId() + "-" + a.getVersion() + c + ".jar");
        }
    }
}
