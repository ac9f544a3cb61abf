package real;

import java.io.File;
import java.nio.file.Files;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.Statement;
import java.util.concurrent.ThreadLocalRandom;

/**
 * An H2 database in a file under load, for the io engine: {@code H2FileLoad <threads>}
 * creates a table in {@code jdbc:h2:file:} under a new temporary directory, and each thread
 * merges rows of about 1000 characters and commits after each, so the MVStore writes its
 * file all the time ({@code FileChannel.write}, through {@code org.h2.mvstore.FileStore}).
 * Progress: transactions committed.
 */
public class H2FileLoad {
    public static void main(String[] args) throws Exception {
        int threads = Integer.parseInt(args[0]);
        File dir = Files.createTempDirectory("jtap-h2").toFile();
        dir.deleteOnExit();
        String url = "jdbc:h2:file:" + new File(dir, "load").getAbsolutePath();
        try (Connection setup = DriverManager.getConnection(url);
                Statement statement = setup.createStatement()) {
            statement.execute("CREATE TABLE item(id INT PRIMARY KEY, payload VARCHAR(4000))");
        }
        StringBuilder payload = new StringBuilder();
        while (payload.length() < 1000) {
            payload.append("payload line ").append(payload.length()).append('\n');
        }
        Progress progress = new Progress();
        Progress.startThreads("h2-file-client", threads, () -> {
            try (Connection connection = DriverManager.getConnection(url);
                    PreparedStatement merge = connection.prepareStatement("MERGE INTO item KEY(id) VALUES(?, ?)")) {
                connection.setAutoCommit(true);
                while (true) {
                    merge.setInt(1, ThreadLocalRandom.current().nextInt(10_000));
                    merge.setString(2, payload.toString());
                    merge.executeUpdate();
                    progress.add();
                }
            } catch (Throwable e) {
                Progress.failed("client", e);
            }
        });
        progress.reportForever();
    }
}
