package real;

import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.atomic.AtomicLongArray;

/**
 * An in-memory H2 database running four prepared statements of known, distinct cost, for
 * profiles labelled by SQL text: {@code H2Statements <threads>}. Each round of each client
 * thread runs a full scan with {@code LIKE} over every row's payload now and then, an index
 * range sum, ten point reads and five updates. The time each statement's
 * {@code execute...} calls take is the ground truth: it prints {@code SPENT <i> <ns>} for
 * each statement {@code i} of {@link #SQL} every 250 ms, the nanoseconds all threads spent in
 * its calls so far.
 */
public class H2Statements {
    static final String URL = "jdbc:h2:mem:statements;DB_CLOSE_DELAY=-1;DB_CLOSE_ON_EXIT=FALSE";
    static final int ROWS = 5_000;
    static final String[] SQL = {
        "SELECT COUNT(*) FROM item WHERE payload LIKE ?",
        "SELECT SUM(qty), COUNT(*) FROM item WHERE qty BETWEEN ? AND ?",
        "SELECT name, qty FROM item WHERE id = ?",
        "UPDATE item SET qty = ? WHERE id = ?",
    };
    static final AtomicLongArray SPENT = new AtomicLongArray(SQL.length);

    public static void main(String[] args) throws Exception {
        int threads = Integer.parseInt(args[0]);
        try (Connection setup = DriverManager.getConnection(URL);
                Statement statement = setup.createStatement()) {
            statement.execute("CREATE TABLE item(id INT PRIMARY KEY, name VARCHAR(64), qty INT, payload VARCHAR(4000))");
            statement.execute("CREATE INDEX item_qty ON item(qty)");
            try (PreparedStatement insert = setup.prepareStatement("INSERT INTO item VALUES (?, ?, ?, ?)")) {
                for (int id = 0; id < ROWS; id++) {
                    insert.setInt(1, id);
                    insert.setString(2, "item-" + id);
                    insert.setInt(3, id % 1000);
                    insert.setString(4, H2Load.payload(id));
                    insert.executeUpdate();
                }
            }
        }
        Progress progress = new Progress();
        Progress.startThreads("h2-client", threads, () -> {
            try (Connection connection = DriverManager.getConnection(URL)) {
                PreparedStatement[] prepared = new PreparedStatement[SQL.length];
                for (int i = 0; i < SQL.length; i++) {
                    prepared[i] = connection.prepareStatement(SQL[i]);
                }
                for (long round = 0; ; round++) {
                    try {
                        round(prepared, round);
                        progress.add();
                    } catch (SQLException e) {
                        if (!H2Load.isConflict(e)) {
                            Progress.failed("round", e);
                        }
                    }
                }
            } catch (Throwable e) {
                Progress.failed("client", e);
            }
        });
        Thread spent = new Thread(() -> {
            while (true) {
                StringBuilder lines = new StringBuilder();
                for (int i = 0; i < SQL.length; i++) {
                    lines.append("SPENT ").append(i).append(' ').append(SPENT.get(i)).append('\n');
                }
                System.out.print(lines);
                System.out.flush();
                try {
                    Thread.sleep(250);
                } catch (InterruptedException e) {
                    return;
                }
            }
        }, "spent");
        spent.setDaemon(true);
        spent.start();
        progress.reportForever();
    }

    static void round(PreparedStatement[] prepared, long round) throws SQLException {
        ThreadLocalRandom random = ThreadLocalRandom.current();
        if (round % 12 == 0) {
            prepared[0].setString(1, "%line 7: x%");
            timed(0, prepared[0], true);
        }
        int low = random.nextInt(1000);
        prepared[1].setInt(1, low);
        prepared[1].setInt(2, low + 40);
        timed(1, prepared[1], true);
        for (int i = 0; i < 10; i++) {
            prepared[2].setInt(1, random.nextInt(ROWS));
            timed(2, prepared[2], true);
        }
        for (int i = 0; i < 5; i++) {
            prepared[3].setInt(1, random.nextInt(1000));
            prepared[3].setInt(2, random.nextInt(ROWS));
            timed(3, prepared[3], false);
        }
    }

    /** Runs statement {@code index}, counting the time of its execute call. */
    static void timed(int index, PreparedStatement statement, boolean query) throws SQLException {
        long start = System.nanoTime();
        if (query) {
            try (ResultSet rows = statement.executeQuery()) {
                SPENT.addAndGet(index, System.nanoTime() - start);
                while (rows.next()) {
                    rows.getString(1);
                }
            }
        } else {
            statement.executeUpdate();
            SPENT.addAndGet(index, System.nanoTime() - start);
        }
    }
}
