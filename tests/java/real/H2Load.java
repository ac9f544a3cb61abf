package real;

import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.concurrent.ThreadLocalRandom;

/**
 * An in-memory H2 database under load: {@code H2Load <threads>} creates a table in
 * {@code jdbc:h2:mem:}, and each thread runs transactions through JDBC in a loop (merge a
 * row, read it back, update it, sum a range, now and then delete one), which keeps
 * {@code org.h2.mvstore.MVMap.operate} hot. Each row carries a payload of about 1000
 * characters over several lines and the merge statement's SQL has two lines, so traced
 * values describing statements are long and multi-line.
 * Progress: transactions committed.
 */
public class H2Load {
    static final String URL = "jdbc:h2:mem:load;DB_CLOSE_DELAY=-1;DB_CLOSE_ON_EXIT=FALSE";
    static final int ROWS = 5_000;

    public static void main(String[] args) throws Exception {
        int threads = Integer.parseInt(args[0]);
        createTable();
        Progress progress = new Progress();
        Progress.startThreads("h2-client", threads, () -> {
            try (Connection connection = DriverManager.getConnection(URL)) {
                connection.setAutoCommit(false);
                while (true) {
                    try {
                        transaction(connection);
                        connection.commit();
                        progress.add();
                    } catch (SQLException e) {
                        connection.rollback();
                        if (!isConflict(e)) {
                            Progress.failed("transaction", e);
                        }
                    }
                }
            } catch (Throwable e) {
                Progress.failed("client", e);
            }
        });
        progress.reportForever();
    }

    /** The table the transactions work on, in the in-memory database at {@link #URL}. */
    static void createTable() throws SQLException {
        try (Connection setup = DriverManager.getConnection(URL);
                Statement statement = setup.createStatement()) {
            statement.execute("CREATE TABLE item(id INT PRIMARY KEY, name VARCHAR(64), qty INT, payload VARCHAR(4000))");
            statement.execute("CREATE INDEX item_qty ON item(qty)");
        }
    }

    /** Concurrent updates of one row are expected to fail now and then: not an error. */
    static boolean isConflict(SQLException e) {
        int code = e.getErrorCode();
        return code == 90131 /* concurrent update */ || code == 50200 /* lock timeout */ || code == 40001 /* deadlock */;
    }

    static void transaction(Connection connection) throws SQLException {
        ThreadLocalRandom random = ThreadLocalRandom.current();
        int id = random.nextInt(ROWS);
        try (PreparedStatement merge = connection.prepareStatement("MERGE INTO item KEY(id)\nVALUES (?, ?, ?, ?)")) {
            merge.setInt(1, id);
            merge.setString(2, "item-" + id);
            merge.setInt(3, random.nextInt(1000));
            merge.setString(4, payload(id));
            merge.executeUpdate();
        }
        try (PreparedStatement select = connection.prepareStatement("SELECT name, qty, payload FROM item WHERE id = ?")) {
            select.setInt(1, id);
            try (ResultSet rows = select.executeQuery()) {
                if (!rows.next() || !rows.getString(1).equals("item-" + id)) {
                    throw new IllegalStateException("row " + id + " not read back");
                }
            }
        }
        try (PreparedStatement update = connection.prepareStatement("UPDATE item SET qty = qty + 1 WHERE id = ?")) {
            update.setInt(1, id);
            update.executeUpdate();
        }
        try (PreparedStatement sum = connection.prepareStatement("SELECT SUM(qty), COUNT(*) FROM item WHERE qty BETWEEN ? AND ?")) {
            int low = random.nextInt(1000);
            sum.setInt(1, low);
            sum.setInt(2, low + 20);
            try (ResultSet rows = sum.executeQuery()) {
                rows.next();
            }
        }
        if (random.nextInt(10) == 0) {
            try (PreparedStatement delete = connection.prepareStatement("DELETE FROM item WHERE id = ?")) {
                delete.setInt(1, random.nextInt(ROWS));
                delete.executeUpdate();
            }
        }
    }

    /** About 1000 characters on 20 lines. */
    static String payload(int id) {
        StringBuilder text = new StringBuilder();
        for (int line = 0; line < 20; line++) {
            text.append("item ").append(id).append(" line ").append(line).append(": ");
            while (text.length() % 50 != 49) {
                text.append('x');
            }
            text.append('\n');
        }
        return text.toString();
    }
}
