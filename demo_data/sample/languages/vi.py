"""Vietnamese: the names, places, companies, templates and fillers of the
sample's Vietnamese news (template syntax: `demo_data.sample.templates`).
"""

PACK = dict(
    code="vi",
    places=[
        "Hà Nội",
        "Hải Phòng",
        "Đà Nẵng",
        "Cần Thơ",
        "Huế",
        "Nha Trang",
        "Vinh",
        "Quy Nhơn",
        "Đà Lạt",
        "Buôn Ma Thuột",
        "Thái Nguyên",
        "Nam Định",
        "Vũng Tàu",
        "Hạ Long",
        "Biên Hòa",
        "Pleiku",
        "Thanh Hóa",
        "Phan Thiết",
    ],
    orgs=[
        "Công ty Minh Long",
        "Tập đoàn Phú Thịnh",
        "Công ty Sao Việt",
        "Tập đoàn Hưng Phát",
        "Công ty Đại Dương Xanh",
        "Tập đoàn Hoàng Gia",
        "Công ty Kim Cương",
        "Công ty Thành Đạt",
        "Tập đoàn An Khang",
        "Công ty Bình Minh",
        "Công ty Hồng Hà",
        "Tập đoàn Tân Tiến",
        "Công ty Phương Nam",
        "Công ty Trường Sơn",
        "Tập đoàn Vạn Xuân",
    ],
    # Vietnamese names carry gender in the middle and given name.
    given={
        "m": [
            "Văn An",
            "Văn Bình",
            "Minh Cường",
            "Đức Dũng",
            "Quốc Hải",
            "Văn Hùng",
            "Minh Khoa",
            "Đức Lâm",
            "Hữu Nam",
            "Quốc Phong",
            "Văn Quang",
            "Minh Sơn",
            "Đức Thắng",
            "Minh Tuấn",
            "Quốc Việt",
        ],
        "f": [
            "Thị Anh",
            "Thu Hà",
            "Thị Hằng",
            "Ngọc Hoa",
            "Thị Hương",
            "Thu Lan",
            "Ngọc Linh",
            "Thị Mai",
            "Thu Ngân",
            "Thị Nhung",
            "Ngọc Quyên",
            "Thị Thảo",
            "Thu Trang",
            "Thị Vân",
            "Ngọc Yến",
        ],
    },
    surnames=[
        "Nguyễn",
        "Trần",
        "Lê",
        "Phạm",
        "Hoàng",
        "Huỳnh",
        "Phan",
        "Vũ",
        "Võ",
        "Đặng",
        "Bùi",
        "Đỗ",
        "Hồ",
        "Ngô",
        "Dương",
        "Lý",
        "Trịnh",
        "Đinh",
        "Mai",
        "Cao",
    ],
    surname_first=True,
    days=["hôm thứ Hai", "hôm thứ Ba", "hôm thứ Tư", "hôm thứ Năm", "hôm thứ Sáu"],
    roles={
        "minister": "Bộ trưởng",
        "mayor": "Chủ tịch thành phố",
        "governor": "Chủ tịch tỉnh",
        "director": "Tổng giám đốc",
    },
    frames={
        "invest": {
            "article": [
                "{role} {name} {day} cho biết <ông|bà> đã nhận được cam kết đầu tư {num} tỷ "
                "đồng từ {org} cho {place}.",
                "{org} sẽ đầu tư {num} tỷ đồng vào {place}, theo thông báo của {role} {name} "
                "{day}.",
            ],
            "summary": [
                "{org} <<sẽ đầu tư|đầu tư sẽ>> {num} tỷ đồng vào {place}, {role} {name} cho biết.",
                "{role} {name} công bố khoản đầu tư {num} tỷ đồng của {org} vào {place}.",
            ],
        },
        "protest": {
            "article": [
                "khoảng {num} người <<đã tuần hành|tuần hành đã>> tại {place} {day} để phản "
                "đối kế hoạch của {org}.",
                "{day}, {num} người biểu tình đã tập trung tại {place} để phản đối {org}.",
            ],
            "summary": [
                "{num} người <<xuống đường|đường xuống>> tại {place} phản đối {org}.",
                "người dân {place} phản đối kế hoạch của {org}, với khoảng {num} người tham gia.",
            ],
        },
        "factory": {
            "article": [
                "{org} đã khánh thành <<nhà máy mới|mới nhà máy>> tại {place}, tạo việc làm "
                "cho {num} lao động.",
                "nhà máy mới của {org} tại {place} sẽ sử dụng {num} công nhân.",
            ],
            "summary": [
                "{org} mở nhà máy tại {place}, tạo {num} việc làm mới.",
                "<<nhà máy mới|mới nhà máy>> của {org} ở {place} sẽ tuyển {num} lao động.",
            ],
        },
        "election": {
            "article": [
                "<ông|bà> {name} đã trúng cử chức chủ tịch thành phố {place} với {num}% số phiếu.",
                "với {num}% phiếu bầu, <ông|bà> {name} đã trở thành người đứng đầu {place}.",
            ],
            "summary": [
                "<ông|bà> {name} đắc cử chủ tịch {place} với {num}% phiếu bầu.",
                "{place} có lãnh đạo mới là <ông|bà> {name}, người giành {num}% số phiếu.",
            ],
        },
        "arrest": {
            "article": [
                "cảnh sát {place} {day} đã bắt giữ {num} nghi phạm sau nhiều cuộc đột kích.",
                "{num} người <<đã bị bắt|bị đã bắt>> tại {place} {day}, cảnh sát cho biết.",
            ],
            "summary": [
                "cảnh sát bắt giữ {num} người tại {place} sau các cuộc đột kích.",
                "{num} nghi phạm <<đã bị bắt giữ|bị bắt giữ đã>> ở {place}.",
            ],
        },
        "storm": {
            "article": [
                "cơn bão đã làm hư hại {num} ngôi nhà tại {place}, {role} {name} cho biết.",
                "{role} {name} nói rằng {num} căn nhà ở {place} đã bị bão tàn phá.",
            ],
            "summary": [
                "bão làm hư hại {num} <<ngôi nhà|nhà ngôi>> ở {place}, theo {role} {name}.",
                "{num} căn nhà tại {place} bị hư hại do bão, <ông|bà> {name} cho biết.",
            ],
        },
        "resign": {
            "article": [
                "{role} {org} {name} đã từ chức {day} sau {num} năm giữ cương vị này.",
                "sau {num} năm làm việc tại {org}, <ông|bà> {name} {day} đã nộp đơn từ chức.",
            ],
            "summary": [
                "<ông|bà> {name} rời {org} sau {num} năm.",
                "{role} {name} <<từ chức sau|sau từ chức>> {num} năm lãnh đạo {org}.",
            ],
        },
    },
    fillers={
        "prefix": [
            "theo thông tin từ nhiều nguồn khác nhau trong ngày, ",
            "như nhiều cơ quan báo chí đã đưa tin, ",
            "trong một diễn biến thu hút nhiều sự chú ý, ",
        ],
        "suffix": [
            ", theo thông tin được nhiều nguồn xác nhận trong ngày",
            ", như nhiều cơ quan báo chí đã đồng loạt đưa tin",
        ],
        "sentence": [
            "Thông tin này đã được nhiều nguồn xác nhận trong ngày.",
            "Tin tức này được lan truyền rộng rãi và thu hút nhiều sự chú ý.",
            "Dự kiến thêm nhiều chi tiết sẽ được công bố trong những ngày và tuần tới.",
        ],
    },
)
